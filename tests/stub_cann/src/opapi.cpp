// libopapi of the stub: what every operator shares (see opapi.h): the phase-one checks,
// executors, phase two (runtime checks, the elementwise loop, rounding, views) and the defects.
#include "opapi.h"

#include <algorithm>
#include <csignal>
#include <memory>
#include <mutex>
#include <set>

// What phase one hands to phase two: copies of the tensor descriptions (the caller may
// destroy its aclTensors and aclScalars in between), the compute dtype, the attributes and
// the workspace it asked for.
struct aclOpExecutor {
    const stub::OpDef* def;
    aclTensor dy, x, out;
    aclDataType compute;
    bool ties_away;
    stub::Attrs attrs;
    uint64_t workspace;
};

namespace stub {

const DTypes kFloats = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
const DTypes kFp32Fp16 = {ACL_FLOAT, ACL_FLOAT16};
const DTypes kOutputTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};

namespace {

std::string ShapeStr(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
    return r + "]";
}

int64_t Numel(const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

}  // namespace

// ---------------------------------------------------------------- phase one checks

aclnnStatus Checker::Invalid(const std::string& why) const {
    ReportError(std::string(def_.api) + "GetWorkspaceSize: " + why);
    return ACLNN_ERR_PARAM_INVALID;
}

aclnnStatus Checker::Unsupported() const {
    return Invalid(std::string("not supported on ") + aclrtGetSocName() + " (product " + product_ + ")");
}

aclnnStatus Checker::Null(const char* name) const {
    ReportError(std::string(def_.api) + "GetWorkspaceSize: " + name + " is a null pointer");
    return ACLNN_ERR_PARAM_NULLPTR;
}

aclnnStatus Checker::NotNull(std::initializer_list<Arg> args) const {
    for (const Arg& a : args) {
        if (a.t == nullptr) return Null(a.name);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::DtypesIn(const DTypes& ok, std::initializer_list<Arg> args) const {
    if (ok.empty()) return Unsupported();
    for (const Arg& a : args) {
        if (!In(a.t->dtype, ok)) {
            return Invalid(std::string(a.name) + " dtype " + DTypeName(a.t->dtype) + " is not supported on " +
                           aclrtGetSocName() + " (product " + product_ + ")");
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::SameDtype(std::initializer_list<Arg> args) const {
    const Arg& first = *args.begin();
    for (const Arg& a : args) {
        if (a.t->dtype != first.t->dtype) {
            return Invalid(std::string("dtypes differ: ") + first.name + " " + DTypeName(first.t->dtype) + ", " +
                           a.name + " " + DTypeName(a.t->dtype));
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::Dims(size_t lo, size_t hi, std::initializer_list<Arg> args) const {
    for (const Arg& a : args) {
        if (a.t->view.size() < lo || a.t->view.size() > hi) {
            return Invalid(std::string(a.name) + " has " + std::to_string(a.t->view.size()) + " dims; expected " +
                           std::to_string(lo) + "-" + std::to_string(hi));
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::SameShape(std::initializer_list<Arg> args) const {
    const Arg& first = *args.begin();
    for (const Arg& a : args) {
        if (a.t->view != first.t->view) {
            return Invalid(std::string("shapes differ: ") + first.name + " " + ShapeStr(first.t->view) + ", " + a.name +
                           " " + ShapeStr(a.t->view));
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::SameFormat(std::initializer_list<Arg> args) const {
    const Arg& first = *args.begin();
    for (const Arg& a : args) {
        if (a.t->format != first.t->format) {
            return Invalid(std::string("formats differ: ") + first.name + " " + std::to_string(first.t->format) +
                           ", " + a.name + " " + std::to_string(a.t->format));
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::Broadcast(Arg a, Arg b, Arg out) const {
    const auto& x = a.t->view;
    const auto& y = b.t->view;
    size_t n = std::max(x.size(), y.size());
    std::vector<int64_t> shape(n);
    for (size_t i = 0; i < n; ++i) {
        int64_t dx = i < n - x.size() ? 1 : x[i - (n - x.size())];
        int64_t dy = i < n - y.size() ? 1 : y[i - (n - y.size())];
        if (dx != dy && dx != 1 && dy != 1) {
            return Invalid(std::string(a.name) + " " + ShapeStr(x) + " and " + b.name + " " + ShapeStr(y) +
                           " do not broadcast");
        }
        shape[i] = dx == 1 ? dy : dx;
    }
    if (out.t->view != shape) {
        return Invalid(std::string(out.name) + " " + ShapeStr(out.t->view) + " is not the broadcast shape " +
                       ShapeStr(shape));
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Checker::ScalarToFloat(const char* name, const aclScalar* s, float* v) const {
    if (!ScalarAs(*s, v)) return Invalid(std::string(name) + " dtype " + DTypeName(s->dtype) + ": the stub cannot convert it");
    return ACLNN_SUCCESS;
}

bool OneOf(const std::string& product, const char* list) {
    std::string padded = std::string(" ") + list + " ";
    return padded.find(" " + product + " ") != std::string::npos;
}

DTypes ForProduct(const std::string& product, const char* bf16, const char* plain, DTypes base) {
    if (OneOf(product, bf16)) base.push_back(ACL_BF16);
    else if (!OneOf(product, plain)) base.clear();
    return base;
}

aclDataType Promote(aclDataType a, aclDataType b) {
    if (a == b) return IsFloating(a) || IsIntegral(a) ? a : ACL_DT_UNDEFINED;
    if (IsFloating(a) && IsFloating(b)) {
        if (a == ACL_DOUBLE || b == ACL_DOUBLE) return ACL_DOUBLE;
        return ACL_FLOAT;  // FLOAT with a 16-bit float, or FLOAT16 with BF16
    }
    if (IsFloating(a) && IsIntegral(b)) return a;
    if (IsIntegral(a) && IsFloating(b)) return b;
    if (IsIntegral(a) && IsIntegral(b)) return ACL_INT64;
    return ACL_DT_UNDEFINED;
}

bool CanCast(aclDataType from, aclDataType to) {
    bool complex_from = from == ACL_COMPLEX32 || from == ACL_COMPLEX64 || from == ACL_COMPLEX128;
    bool complex_to = to == ACL_COMPLEX32 || to == ACL_COMPLEX64 || to == ACL_COMPLEX128;
    if (complex_from && !complex_to) return false;
    if (IsFloating(from) && IsIntegral(to)) return false;
    return !(from != ACL_BOOL && to == ACL_BOOL);
}

// ---------------------------------------------------------------- executors

namespace {

constexpr uint64_t kWorkspaceBytes = 1024;  // asked for every non-empty call, to exercise the workspace path

std::mutex executors_mu;
std::set<aclOpExecutor*>& Executors() {
    static auto* live = new std::set<aclOpExecutor*>;
    return *live;
}

}  // namespace

aclnnStatus PhaseOne(const OpDef& def, uint64_t* workspaceSize, aclOpExecutor** executor, const aclTensor* dy,
                     const aclTensor* x, const aclTensor* out, const Check& check) {
    std::string api = std::string(def.api) + "GetWorkspaceSize: ";
    if (workspaceSize == nullptr || executor == nullptr) {
        ReportError(api + "workspaceSize and executor must not be null");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!DeviceReady()) {
        ReportError(api + "no device set (aclInit, aclrtSetDevice)");
        return ACLNN_ERR_RUNTIME_ERROR;
    }
    Checker c(def);
    RETURN_IF_FAILED(check(c));
    auto* e = new aclOpExecutor{&def, *dy, *x, *out, c.compute, c.ties_away, c.attrs, 0};
    if (e->compute == ACL_DT_UNDEFINED) e->compute = out->dtype;
    e->workspace = Numel(out->view) > 0 ? kWorkspaceBytes : 0;
    {
        std::lock_guard<std::mutex> lock(executors_mu);
        Executors().insert(e);
    }
    *workspaceSize = e->workspace;
    *executor = e;
    return ACLNN_SUCCESS;
}

// ---------------------------------------------------------------- phase two

namespace {

uint64_t StorageBytes(const aclTensor& t) { return static_cast<uint64_t>(Numel(t.storage)) * ElementSize(t.dtype); }

uint8_t* ElementPtr(const aclTensor& t, int64_t index) {
    return static_cast<uint8_t*>(t.data) + index * static_cast<int64_t>(ElementSize(t.dtype));
}

// An element as a double: exact, except INT64 beyond 2^53 (nearest).
double LoadDouble(const aclTensor& t, int64_t index) {
    const uint8_t* p = ElementPtr(t, index);
    switch (t.dtype) {
        case ACL_DOUBLE: return Raw<double>(p);
        case ACL_FLOAT: return Raw<float>(p);
        case ACL_FLOAT16: return HalfToFloat(Raw<uint16_t>(p));
        case ACL_BF16: return Bf16ToFloat(Raw<uint16_t>(p));
        case ACL_INT8: return Raw<int8_t>(p);
        case ACL_INT16: return Raw<int16_t>(p);
        case ACL_INT32: return Raw<int32_t>(p);
        case ACL_INT64: return static_cast<double>(Raw<int64_t>(p));
        case ACL_UINT8: return Raw<uint8_t>(p);
        case ACL_BOOL: return Raw<uint8_t>(p) != 0 ? 1.0 : 0.0;
        default: return 0.0;  // phase one admits no other dtype
    }
}

// An element cast to float32 in one rounding to nearest even (16-bit floats: exact).
float LoadFloat(const aclTensor& t, int64_t index) {
    const uint8_t* p = ElementPtr(t, index);
    switch (t.dtype) {
        case ACL_FLOAT: return Raw<float>(p);
        case ACL_FLOAT16: return HalfToFloat(Raw<uint16_t>(p));
        case ACL_BF16: return Bf16ToFloat(Raw<uint16_t>(p));
        case ACL_INT64: return static_cast<float>(Raw<int64_t>(p));
        default: return static_cast<float>(LoadDouble(t, index));
    }
}

// Rounds to nearest even (bf16: ties away from zero if asked); a DOUBLE output is exact.
void StoreFloat(const aclTensor& t, int64_t index, float v, bool ties_away) {
    uint8_t* p = ElementPtr(t, index);
    if (t.dtype == ACL_FLOAT) {
        std::memcpy(p, &v, 4);
    } else if (t.dtype == ACL_DOUBLE) {
        double d = v;
        std::memcpy(p, &d, 8);
    } else {
        uint16_t h = t.dtype == ACL_FLOAT16 ? FloatToHalf(v) : FloatToBf16(v, ties_away);
        std::memcpy(p, &h, 2);
    }
}

// v rounded to `type` (and back to float).
float RoundTo(float v, aclDataType type, bool ties_away) {
    if (type == ACL_FLOAT16) return HalfToFloat(FloatToHalf(v));
    if (type == ACL_BF16) return Bf16ToFloat(FloatToBf16(v, ties_away));
    return v;
}

// An input element as the kernel sees it: l0op::Cast to the compute dtype (an integer bound
// for a 16-bit float goes through float32), widened to T exactly.
template <class T>
T Load(const aclOpExecutor& e, const aclTensor& t, int64_t index);
template <>
float Load<float>(const aclOpExecutor& e, const aclTensor& t, int64_t index) {
    float v = LoadFloat(t, index);
    return t.dtype == e.compute ? v : RoundTo(v, e.compute, false);
}
template <>
double Load<double>(const aclOpExecutor&, const aclTensor& t, int64_t index) { return LoadDouble(t, index); }

// A kernel result stored into the output: rounded to the compute dtype, then cast (to nearest
// even) to the output dtype if that differs. A double result bound for a 16-bit float goes
// through float32 (two roundings).
void Store(const aclOpExecutor& e, int64_t index, float v) {
    if (e.compute != e.out.dtype) {
        StoreFloat(e.out, index, RoundTo(v, e.compute, e.ties_away), false);  // then l0op::Cast
    } else {
        StoreFloat(e.out, index, v, e.ties_away);
    }
}
void Store(const aclOpExecutor& e, int64_t index, double v) {
    if (e.out.dtype == ACL_DOUBLE) {
        std::memcpy(ElementPtr(e.out, index), &v, 8);
    } else {
        StoreFloat(e.out, index, static_cast<float>(v), false);
    }
}

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
int64_t OutsideView(const aclTensor& t) {
    int64_t storage = Numel(t.storage), last = t.offset;
    for (size_t i = 0; i < t.view.size(); ++i) last += (t.view[i] - 1) * t.strides[i];
    if (last + 1 < storage) return last + 1;
    if (t.offset > 0) return t.offset - 1;
    if (storage > (int64_t{1} << 26)) return -1;
    std::vector<bool> covered(static_cast<size_t>(storage), false);
    Walker w(t.view, {&t});
    for (int64_t i = Numel(t.view); i > 0; --i, w.Next()) covered[static_cast<size_t>(w.At(0))] = true;
    for (int64_t i = 0; i < storage; ++i) {
        if (!covered[static_cast<size_t>(i)]) return i;
    }
    return -1;
}

bool DefectApplies(const Defect& d, const OpDef& def, int64_t numel) {
    return d.kind != DefectKind::kNone && (d.op.empty() || d.op == def.api) && (d.numel < 0 || d.numel == numel);
}

aclnnStatus RunFailed(aclnnStatus status, const OpDef& def, const std::string& why) {
    ReportError(std::string(def.api) + ": " + why);
    return status;
}

// The elementwise loop in T (float: the AI Core kernels; double: an AI CPU kernel).
template <class T>
void Compute(const aclOpExecutor& e, T (*kernel)(T, T, const Attrs&), bool wrong_values) {
    int64_t n = Numel(e.out.view);
    std::vector<T> result(static_cast<size_t>(n));  // all reads first: the output may alias an input
    Walker in(e.out.view, {&e.dy, &e.x});
    for (int64_t i = 0; i < n; ++i, in.Next()) {
        T v = kernel(Load<T>(e, e.dy, in.At(0)), Load<T>(e, e.x, in.At(1)), e.attrs);
        result[static_cast<size_t>(i)] = wrong_values ? -v : v;
    }
    Walker w(e.out.view, {&e.out});
    for (int64_t i = 0; i < n; ++i, w.Next()) Store(e, w.At(0), result[static_cast<size_t>(i)]);
}

void CorruptOutside(const aclTensor& out, int64_t n) {
    int64_t at = n == 0 ? 0 : OutsideView(out);
    if (at < 0) {  // the view covers the whole storage: corrupt its last element instead
        at = out.offset;
        for (size_t i = 0; i < out.view.size(); ++i) at += (out.view[i] - 1) * out.strides[i];
    }
    uint8_t* p = ElementPtr(out, at);
    for (uint64_t b = 0; b < ElementSize(out.dtype); ++b) p[b] = static_cast<uint8_t>(~p[b]);
}

}  // namespace

aclnnStatus PhaseTwo(const OpDef& api, void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                     aclrtStream stream) {
    if (executor == nullptr) return RunFailed(ACLNN_ERR_PARAM_NULLPTR, api, "executor is null");
    {
        std::lock_guard<std::mutex> lock(executors_mu);
        if (Executors().erase(executor) == 0) {
            return RunFailed(ACLNN_ERR_PARAM_INVALID, api, "executor is not from a successful phase one, or already run");
        }
    }
    std::unique_ptr<aclOpExecutor> e(executor);  // an executor runs once, then is freed
    const OpDef& def = *e->def;
    if (!DeviceReady()) return RunFailed(ACLNN_ERR_RUNTIME_ERROR, def, "no device set");
    if (!IsStream(stream)) return RunFailed(ACLNN_ERR_RUNTIME_ERROR, def, "unknown stream");
    if (e->workspace > 0) {
        if (workspace == nullptr) return RunFailed(ACLNN_ERR_PARAM_NULLPTR, def, "workspace is null");
        if (workspaceSize < e->workspace) {
            return RunFailed(ACLNN_ERR_PARAM_INVALID, def, "workspaceSize " + std::to_string(workspaceSize) +
                                                               " < the " + std::to_string(e->workspace) + " phase one asked for");
        }
        if (!IsDeviceRange(workspace, e->workspace)) {
            return RunFailed(ACLNN_ERR_RUNTIME_ERROR, def, "workspace is not device memory of that size");
        }
    }
    for (const aclTensor* t : {&e->dy, &e->x, &e->out}) {
        uint64_t bytes = StorageBytes(*t);
        if (bytes > 0 && !IsDeviceRange(t->data, bytes)) {
            return RunFailed(ACLNN_ERR_RUNTIME_ERROR, def, "a tensor's storage (" + std::to_string(bytes) +
                                                               " bytes) is not inside one aclrtMalloc allocation");
        }
    }

    const Defect& defect = DefectConfig();
    int64_t n = Numel(e->out.view);
    DefectKind kind = DefectApplies(defect, def, n) ? defect.kind : DefectKind::kNone;
    if (kind == DefectKind::kCrash) {
        std::signal(SIGSEGV, SIG_DFL);  // not a sanitizer's handler: die of the signal itself
        std::raise(SIGSEGV);
    }
    if (n > 0) {
        std::memset(workspace, 0xa5, e->workspace);  // the kernel scribbles on its workspace
        bool wrong = kind == DefectKind::kWrongValues;
        if (e->compute == ACL_DOUBLE) {
            Compute(*e, def.kernel64, wrong);
        } else {
            Compute(*e, def.kernel, wrong);
        }
    }
    if (kind == DefectKind::kWriteOutside && StorageBytes(e->out) > 0) CorruptOutside(e->out, n);
    if (kind == DefectKind::kHang) HangStream(stream);
    if (kind == DefectKind::kSyncError) FaultStream(stream);
    return ACLNN_SUCCESS;
}

}  // namespace stub
