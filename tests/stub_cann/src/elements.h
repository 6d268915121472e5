// Internals of libopapi (not installed): tensor elements through their views, in any dtype the
// stub loads, and the float32 <-> storage conversions every operator's phase two uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stub.h"

namespace stub {

std::string ShapeStr(const std::vector<int64_t>& s);
int64_t Numel(const std::vector<int64_t>& dims);

uint64_t StorageBytes(const aclTensor& t);
uint8_t* ElementPtr(const aclTensor& t, int64_t index);
// An element as a double: exact, except INT64 beyond 2^53 (nearest).
double LoadDouble(const aclTensor& t, int64_t index);
// An element cast to float32 in one rounding to nearest even (16-bit floats: exact).
float LoadFloat(const aclTensor& t, int64_t index);
// An integer element (INT8/16/32/64, UINT8, BOOL) exactly.
int64_t LoadInt(const aclTensor& t, int64_t index);
// An integer element (INT8/16/32/64, UINT8) saturated to the dtype's range.
void StoreInt(const aclTensor& t, int64_t index, int64_t v);
// Rounds to nearest even (bf16: ties away from zero if asked); a DOUBLE output is exact.
void StoreFloat(const aclTensor& t, int64_t index, float v, bool ties_away);
// v rounded to `type` (and back to float).
float RoundTo(float v, aclDataType type, bool ties_away);

// Walks the output view in row-major order, keeping each operand's storage
// index; an input of lower rank or with size-1 dims is broadcast (stride 0).
class Walker {
 public:
    Walker(const std::vector<int64_t>& dims, const std::vector<const aclTensor*>& operands)
        : dims_(dims), idx_(dims.size(), 0) {
        size_t n = dims.size();
        for (const aclTensor* t : operands) {
            std::vector<int64_t> s(n, 0);
            size_t lead = n - t->view.size();
            for (size_t i = lead; i < n; ++i) s[i] = t->view[i - lead] == 1 ? 0 : t->strides[i - lead];
            strides_.push_back(s);
            pos_.push_back(t->offset);
        }
    }

    int64_t At(size_t operand) const { return pos_[operand]; }

    void Next() {
        for (size_t d = dims_.size(); d-- > 0;) {
            ++idx_[d];
            for (size_t k = 0; k < pos_.size(); ++k) pos_[k] += strides_[k][d];
            if (idx_[d] < dims_[d]) return;
            for (size_t k = 0; k < pos_.size(); ++k) pos_[k] -= strides_[k][d] * dims_[d];
            idx_[d] = 0;
        }
    }

 private:
    std::vector<int64_t> dims_, idx_, pos_;
    std::vector<std::vector<int64_t>> strides_;
};

// A storage element of t outside its view (-1 if the view covers the storage):
// the one after the view's last element, else the one before its first, else a gap.
int64_t OutsideView(const aclTensor& t);
// The write-outside defect: inverts the bytes of one storage element outside the view (see README.md).
void CorruptOutside(const aclTensor& out, int64_t n);

// The view of t broadcast (NumPy rules) to `shape`, row-major, each element as float32 (LoadFloat).
std::vector<float> ReadFloats(const aclTensor& t, const std::vector<int64_t>& shape);
// The view of an integer tensor, row-major.
std::vector<int64_t> ReadInts(const aclTensor& t);
// Writes v (row-major over t's view) into t: each value rounded to `compute` (to nearest even), then cast
// to t's dtype (a second rounding only where they differ, as l0op::Cast after the kernel); negated first
// if `negate` (the wrong-values defect; zeros stay zero).
void WriteFloats(const aclTensor& t, const std::vector<float>& v, aclDataType compute, bool negate);

// A float32 sum of n terms `stride` apart, pairwise (the device's tree order is not published: any order
// accumulating in float32 is a correct kernel).
float PairwiseSum(const float* v, int64_t n, int64_t stride);
// The 950 kernels' float32 row sum (aclnn_cli/ops/treesum.py, docs/kernels.md "Sums"): 64-lane
// blocks zero-padded; the blocks past the largest power of two p below their count added into blocks 0..,
// then halved pairwise down to one block, whose lanes are halved pairwise (lane i + lane i + width).
float TreeSum(const float* v, int64_t n, int64_t stride);

// A shape cut around axes [lo, hi) as the Rows family cuts it: A1 = prod(shape[:lo]), R = prod(shape[lo:hi]),
// A0 = prod(shape[hi:]); element (a1, r, a0) is at (a1 * R + r) * A0 + a0 in row-major order.
struct Rows {
    int64_t a1 = 1, r = 1, a0 = 1;
    Rows(const std::vector<int64_t>& shape, size_t lo, size_t hi);
};

}  // namespace stub
