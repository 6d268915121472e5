// What the stub's loss gradients (ops_loss.cpp, ops_loss_more.cpp) check alike: the reduction attribute and
// the broadcast of self and target.
#ifndef STUB_LOSS_CHECKS_H
#define STUB_LOSS_CHECKS_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "opapi.h"

namespace loss {

inline constexpr int64_t kNone = 0, kMean = 1, kSum = 2;

inline aclnnStatus CheckReduction(const stub::Checker& c, int64_t reduction) {
    if (reduction < kNone || reduction > kSum) {
        return c.Invalid("reduction " + std::to_string(reduction) + " is not 0 (none), 1 (mean) or 2 (sum)");
    }
    return ACLNN_SUCCESS;
}

// The broadcast shape of a and b (NumPy rules), false if they do not broadcast.
inline bool BroadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
    size_t n = std::max(a.size(), b.size());
    out->assign(n, 1);
    for (size_t i = 0; i < n; ++i) {
        int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1) return false;
        (*out)[i] = da == 1 ? db : da;
    }
    return true;
}

}  // namespace loss

#endif  // STUB_LOSS_CHECKS_H
