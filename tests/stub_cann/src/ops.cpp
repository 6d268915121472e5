// libopapi of the stub: the four activation-backward operators.
//
// Phase one (GetWorkspaceSize) applies the rules of each operator's public doc
// (REFERENCE.md section 3, the seeds) for the product of the current SoC.
// Phase two computes on the host the way the device kernels do: 16-bit inputs
// widened to float32, the kernel's float32 formula, one rounding to the output
// dtype (Hardsigmoid: to the promoted type with the kernel's cast mode, then a
// round-to-nearest-even Cast to `out` if that differs).
#include <csignal>
#include <cmath>
#include <memory>
#include <mutex>
#include <set>

#include "aclnnop/aclnn_fast_gelu_backward.h"
#include "aclnnop/aclnn_hardsigmoid_backward.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "opdev/op_errno.h"
#include "stub.h"

namespace {

enum class Op { kSilu, kFastGelu, kLogSigmoid, kHardsigmoid };

const char* ApiName(Op op) {
    switch (op) {
        case Op::kSilu: return "aclnnSiluBackward";
        case Op::kFastGelu: return "aclnnFastGeluBackward";
        case Op::kLogSigmoid: return "aclnnLogSigmoidBackward";
        case Op::kHardsigmoid: return "aclnnHardsigmoidBackward";
    }
    return "?";
}

// ---------------------------------------------------------------- device kernels (float32)

float SiluGrad(float dy, float x) {
    float s = 1.0f / (1.0f + std::exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}

float FastGeluGrad(float dy, float x) {
    float m = -1.702f * x;
    float d = 1.0f / (std::exp(m) + 1.0f);
    return ((d - 1.0f) * m + 1.0f) * d * dy;
}

float LogSigmoidGrad(float dy, float x) {
    float e = std::exp(-std::fabs(x));
    float q = (x < 0.0f ? 1.0f : e) / (1.0f + e);
    return q * dy;
}

float HardsigmoidGrad(float dy, float x) {
    const float alpha = 1.0f / 6.0f, beta = 0.5f;
    float t = x * alpha + beta;  // NaN x: both comparisons false, 0
    float r = dy * alpha;
    return (t > 0.0f && t < 1.0f) ? r : 0.0f;
}

using Kernel = float (*)(float, float);

Kernel KernelOf(Op op) {
    switch (op) {
        case Op::kSilu: return SiluGrad;
        case Op::kFastGelu: return FastGeluGrad;
        case Op::kLogSigmoid: return LogSigmoidGrad;
        case Op::kHardsigmoid: return HardsigmoidGrad;
    }
    return nullptr;
}

// ---------------------------------------------------------------- phase one

using DTypes = std::vector<aclDataType>;

const DTypes kFloats = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};

// Product -> dtypes the op supports there (docs' product tables); empty: not supported.
DTypes SupportedDtypes(Op op, const std::string& product) {
    bool a2a3 = product == "A2" || product == "A3";
    switch (op) {
        case Op::kSilu:
            if (product == "950" || a2a3) return kFloats;
            if (product == "910") return {ACL_FLOAT, ACL_FLOAT16};
            return {};
        case Op::kFastGelu:
            return product == "950" || a2a3 ? kFloats : DTypes{};
        case Op::kLogSigmoid:
        case Op::kHardsigmoid:
            return a2a3 ? kFloats : DTypes{};
    }
    return {};
}

struct Arg {
    const char* name;
    const aclTensor* t;
};

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

class PhaseOne {
 public:
    explicit PhaseOne(Op op) : op_(op) {}

    aclnnStatus Invalid(const std::string& why) const {
        stub::ReportError(std::string(ApiName(op_)) + "GetWorkspaceSize: " + why);
        return ACLNN_ERR_PARAM_INVALID;
    }

    // 161001 if any tensor is null.
    aclnnStatus NotNull(std::initializer_list<Arg> args) const {
        for (const Arg& a : args) {
            if (a.t == nullptr) {
                stub::ReportError(std::string(ApiName(op_)) + "GetWorkspaceSize: " + a.name + " is a null pointer");
                return ACLNN_ERR_PARAM_NULLPTR;
            }
        }
        return ACLNN_SUCCESS;
    }

    aclnnStatus DtypesSupported(std::initializer_list<Arg> args) const {
        std::string product = stub::Product();
        DTypes ok = SupportedDtypes(op_, product);
        if (ok.empty()) return Invalid(std::string("not supported on ") + aclrtGetSocName() + " (product " + product + ")");
        for (const Arg& a : args) {
            bool found = false;
            for (aclDataType d : ok) found = found || d == a.t->dtype;
            if (!found) {
                return Invalid(std::string(a.name) + " dtype " + stub::DTypeName(a.t->dtype) + " is not supported on " +
                               aclrtGetSocName() + " (product " + product + ")");
            }
        }
        return ACLNN_SUCCESS;
    }

    aclnnStatus SameDtype(std::initializer_list<Arg> args) const {
        const Arg& first = *args.begin();
        for (const Arg& a : args) {
            if (a.t->dtype != first.t->dtype) {
                return Invalid(std::string("dtypes differ: ") + first.name + " " + stub::DTypeName(first.t->dtype) +
                               ", " + a.name + " " + stub::DTypeName(a.t->dtype));
            }
        }
        return ACLNN_SUCCESS;
    }

    aclnnStatus Dims(size_t lo, size_t hi, std::initializer_list<Arg> args) const {
        for (const Arg& a : args) {
            if (a.t->view.size() < lo || a.t->view.size() > hi) {
                return Invalid(std::string(a.name) + " has " + std::to_string(a.t->view.size()) + " dims; expected " +
                               std::to_string(lo) + "-" + std::to_string(hi));
            }
        }
        return ACLNN_SUCCESS;
    }

    aclnnStatus SameShape(std::initializer_list<Arg> args) const {
        const Arg& first = *args.begin();
        for (const Arg& a : args) {
            if (a.t->view != first.t->view) {
                return Invalid(std::string("shapes differ: ") + first.name + " " + ShapeStr(first.t->view) + ", " +
                               a.name + " " + ShapeStr(a.t->view));
            }
        }
        return ACLNN_SUCCESS;
    }

    aclnnStatus SameFormat(std::initializer_list<Arg> args) const {
        const Arg& first = *args.begin();
        for (const Arg& a : args) {
            if (a.t->format != first.t->format) {
                return Invalid(std::string("formats differ: ") + first.name + " " + std::to_string(first.t->format) +
                               ", " + a.name + " " + std::to_string(a.t->format));
            }
        }
        return ACLNN_SUCCESS;
    }

    // gradOutput and self broadcast (NumPy rules) and the output has the broadcast shape.
    aclnnStatus Broadcast(Arg a, Arg b, Arg out) const {
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

 private:
    Op op_;
};

#define RETURN_IF_FAILED(expr)                         \
    do {                                               \
        aclnnStatus status_ = (expr);                  \
        if (status_ != ACLNN_SUCCESS) return status_;  \
    } while (0)

aclnnStatus CheckSilu(const aclTensor* dy, const aclTensor* x, const aclTensor* out) {
    PhaseOne c(Op::kSilu);
    Arg a{"gradOutput", dy}, b{"self", x}, o{"gradInput", out};
    RETURN_IF_FAILED(c.NotNull({a, b, o}));
    RETURN_IF_FAILED(c.DtypesSupported({a, b, o}));
    bool regbase = stub::Product() == "950";  // broadcast and mixed precision exist on 950 only
    if (regbase && dy->dtype != x->dtype) {
        if (out->dtype != ACL_FLOAT) {
            return c.Invalid("gradOutput " + stub::DTypeName(dy->dtype) + " and self " + stub::DTypeName(x->dtype) +
                             " differ: gradInput must be FLOAT, not " + stub::DTypeName(out->dtype));
        }
    } else {
        RETURN_IF_FAILED(c.SameDtype({a, b, o}));
    }
    RETURN_IF_FAILED(c.Dims(1, 8, {a, b, o}));
    if (regbase) return c.Broadcast(a, b, o);
    return c.SameShape({a, b, o});
}

aclnnStatus CheckFastGelu(const aclTensor* dy, const aclTensor* x, const aclTensor* out) {
    PhaseOne c(Op::kFastGelu);
    Arg a{"gradOutput", dy}, b{"self", x}, o{"gradInput", out};
    RETURN_IF_FAILED(c.NotNull({a, b, o}));
    RETURN_IF_FAILED(c.DtypesSupported({a, b, o}));
    RETURN_IF_FAILED(c.SameDtype({a, b, o}));
    RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
    RETURN_IF_FAILED(c.SameShape({a, b, o}));
    return c.SameFormat({a, b, o});
}

aclnnStatus CheckLogSigmoid(const aclTensor* dy, const aclTensor* x, const aclTensor* buffer, const aclTensor* out) {
    PhaseOne c(Op::kLogSigmoid);
    Arg a{"gradOutput", dy}, b{"self", x}, f{"buffer", buffer}, o{"gradInput", out};
    RETURN_IF_FAILED(c.NotNull({a, b, f, o}));
    RETURN_IF_FAILED(c.DtypesSupported({a, b, f, o}));
    RETURN_IF_FAILED(c.SameDtype({a, b, f, o}));
    RETURN_IF_FAILED(c.Dims(1, 8, {a, b, f, o}));
    return c.SameShape({a, b, f, o});
}

aclnnStatus CheckHardsigmoid(const aclTensor* dy, const aclTensor* x, const aclTensor* out) {
    PhaseOne c(Op::kHardsigmoid);
    Arg a{"gradOutput", dy}, b{"self", x}, o{"out", out};
    RETURN_IF_FAILED(c.NotNull({a, b, o}));
    // gradOutput and self are promoted; every float is castable to every float `out`.
    RETURN_IF_FAILED(c.DtypesSupported({a, b, o}));
    RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
    return c.SameShape({a, b, o});
}

}  // namespace

// ---------------------------------------------------------------- the executor

// What phase one hands to phase two: copies of the tensor descriptions (the
// caller may destroy its aclTensors in between) and the workspace it asked for.
struct aclOpExecutor {
    Op op;
    aclTensor dy, x, out;
    uint64_t workspace = 0;
};

namespace {

constexpr uint64_t kWorkspaceBytes = 1024;  // asked for every non-empty call, to exercise the workspace path

std::mutex executors_mu;
std::set<aclOpExecutor*>& Executors() {
    static auto* live = new std::set<aclOpExecutor*>;
    return *live;
}

aclnnStatus PhaseOneDone(aclnnStatus status, Op op, const aclTensor* dy, const aclTensor* x, const aclTensor* out,
                         uint64_t* workspaceSize, aclOpExecutor** executor) {
    if (status != ACLNN_SUCCESS) return status;
    auto* e = new aclOpExecutor{op, *dy, *x, *out, 0};
    e->workspace = Numel(out->view) > 0 ? kWorkspaceBytes : 0;
    {
        std::lock_guard<std::mutex> lock(executors_mu);
        Executors().insert(e);
    }
    *workspaceSize = e->workspace;
    *executor = e;
    return ACLNN_SUCCESS;
}

aclnnStatus PhaseOneStart(Op op, uint64_t* workspaceSize, aclOpExecutor** executor) {
    std::string api = std::string(ApiName(op)) + "GetWorkspaceSize: ";
    if (workspaceSize == nullptr || executor == nullptr) {
        stub::ReportError(api + "workspaceSize and executor must not be null");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!stub::DeviceReady()) {
        stub::ReportError(api + "no device set (aclInit, aclrtSetDevice)");
        return ACLNN_ERR_RUNTIME_ERROR;
    }
    return ACLNN_SUCCESS;
}

// ---------------------------------------------------------------- phase two

uint64_t StorageBytes(const aclTensor& t) { return static_cast<uint64_t>(Numel(t.storage)) * stub::ElementSize(t.dtype); }

uint8_t* ElementPtr(const aclTensor& t, int64_t index) {
    return static_cast<uint8_t*>(t.data) + index * static_cast<int64_t>(stub::ElementSize(t.dtype));
}

float Load(const aclTensor& t, int64_t index) {
    const uint8_t* p = ElementPtr(t, index);
    if (t.dtype == ACL_FLOAT) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return t.dtype == ACL_FLOAT16 ? stub::HalfToFloat(h) : stub::Bf16ToFloat(h);
}

void Store(const aclTensor& t, int64_t index, float v, bool ties_away) {
    uint8_t* p = ElementPtr(t, index);
    if (t.dtype == ACL_FLOAT) {
        std::memcpy(p, &v, 4);
        return;
    }
    uint16_t h = t.dtype == ACL_FLOAT16 ? stub::FloatToHalf(v) : stub::FloatToBf16(v, ties_away);
    std::memcpy(p, &h, 2);
}

// v rounded to `type` (and back to float).
float RoundTo(float v, aclDataType type, bool ties_away) {
    if (type == ACL_FLOAT16) return stub::HalfToFloat(stub::FloatToHalf(v));
    if (type == ACL_BF16) return stub::Bf16ToFloat(stub::FloatToBf16(v, ties_away));
    return v;
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

bool DefectApplies(const stub::Defect& d, Op op, int64_t numel) {
    return d.kind != stub::DefectKind::kNone && (d.op.empty() || d.op == ApiName(op)) && (d.numel < 0 || d.numel == numel);
}

aclnnStatus RunFailed(aclnnStatus status, Op op, const std::string& why) {
    stub::ReportError(std::string(ApiName(op)) + ": " + why);
    return status;
}

aclnnStatus Compute(const aclOpExecutor& e, bool wrong_values) {
    const aclTensor& out = e.out;
    int64_t n = Numel(out.view);
    Kernel kernel = KernelOf(e.op);
    // The kernel's compute type: the output's, except Hardsigmoid, which computes in the promoted
    // input type (equal dtypes stay, any mix is FLOAT) and rounds bf16 half away from zero.
    aclDataType compute = out.dtype;
    bool ties_away = false;
    if (e.op == Op::kHardsigmoid) {
        compute = e.dy.dtype == e.x.dtype ? e.x.dtype : ACL_FLOAT;
        ties_away = compute == ACL_BF16;
    }
    std::vector<float> result(static_cast<size_t>(n));  // all reads first: the output may alias an input
    Walker in(out.view, {&e.dy, &e.x});
    for (int64_t i = 0; i < n; ++i, in.Next()) {
        float v = kernel(Load(e.dy, in.At(0)), Load(e.x, in.At(1)));
        result[static_cast<size_t>(i)] = wrong_values ? -v : v;
    }
    Walker w(out.view, {&out});
    for (int64_t i = 0; i < n; ++i, w.Next()) {
        float v = result[static_cast<size_t>(i)];
        if (compute != out.dtype) {
            Store(out, w.At(0), RoundTo(v, compute, ties_away), false);  // then l0op::Cast, to nearest even
        } else {
            Store(out, w.At(0), v, ties_away);
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus PhaseTwo(Op api, void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
    if (executor == nullptr) return RunFailed(ACLNN_ERR_PARAM_NULLPTR, api, "executor is null");
    {
        std::lock_guard<std::mutex> lock(executors_mu);
        if (Executors().erase(executor) == 0) {
            return RunFailed(ACLNN_ERR_PARAM_INVALID, api, "executor is not from a successful phase one, or already run");
        }
    }
    std::unique_ptr<aclOpExecutor> e(executor);  // an executor runs once, then is freed
    Op op = e->op;
    if (!stub::DeviceReady()) return RunFailed(ACLNN_ERR_RUNTIME_ERROR, op, "no device set");
    if (!stub::IsStream(stream)) return RunFailed(ACLNN_ERR_RUNTIME_ERROR, op, "unknown stream");
    if (e->workspace > 0) {
        if (workspace == nullptr) return RunFailed(ACLNN_ERR_PARAM_NULLPTR, op, "workspace is null");
        if (workspaceSize < e->workspace) {
            return RunFailed(ACLNN_ERR_PARAM_INVALID, op, "workspaceSize " + std::to_string(workspaceSize) +
                                                              " < the " + std::to_string(e->workspace) + " phase one asked for");
        }
        if (!stub::IsDeviceRange(workspace, e->workspace)) {
            return RunFailed(ACLNN_ERR_RUNTIME_ERROR, op, "workspace is not device memory of that size");
        }
    }
    for (const aclTensor* t : {&e->dy, &e->x, &e->out}) {
        uint64_t bytes = StorageBytes(*t);
        if (bytes > 0 && !stub::IsDeviceRange(t->data, bytes)) {
            return RunFailed(ACLNN_ERR_RUNTIME_ERROR, op, "a tensor's storage (" + std::to_string(bytes) +
                                                              " bytes) is not inside one aclrtMalloc allocation");
        }
    }

    const stub::Defect& defect = stub::DefectConfig();
    int64_t n = Numel(e->out.view);
    stub::DefectKind kind = DefectApplies(defect, op, n) ? defect.kind : stub::DefectKind::kNone;
    if (kind == stub::DefectKind::kCrash) {
        std::signal(SIGSEGV, SIG_DFL);  // not a sanitizer's handler: die of the signal itself
        std::raise(SIGSEGV);
    }
    if (n > 0) {
        std::memset(workspace, 0xa5, e->workspace);  // the kernel scribbles on its workspace
        Compute(*e, kind == stub::DefectKind::kWrongValues);
    }
    if (kind == stub::DefectKind::kWriteOutside && StorageBytes(e->out) > 0) {
        int64_t at = n == 0 ? 0 : OutsideView(e->out);
        if (at < 0) {  // the view covers the whole storage: corrupt its last element instead
            at = e->out.offset;
            for (size_t i = 0; i < e->out.view.size(); ++i) at += (e->out.view[i] - 1) * e->out.strides[i];
        }
        uint8_t* p = ElementPtr(e->out, at);
        for (uint64_t b = 0; b < stub::ElementSize(e->out.dtype); ++b) p[b] = static_cast<uint8_t>(~p[b]);
    }
    if (kind == stub::DefectKind::kHang) stub::HangStream(stream);
    if (kind == stub::DefectKind::kSyncError) stub::FaultStream(stream);
    return ACLNN_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------- the public API

extern "C" {

aclnnStatus aclnnSiluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, aclTensor* gradInput,
                                              uint64_t* workspaceSize, aclOpExecutor** executor) {
    RETURN_IF_FAILED(PhaseOneStart(Op::kSilu, workspaceSize, executor));
    return PhaseOneDone(CheckSilu(gradOutput, self, gradInput), Op::kSilu, gradOutput, self, gradInput, workspaceSize,
                        executor);
}

aclnnStatus aclnnSiluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
    return PhaseTwo(Op::kSilu, workspace, workspaceSize, executor, stream);
}

aclnnStatus aclnnFastGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                  aclTensor* gradInput, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor) {
    RETURN_IF_FAILED(PhaseOneStart(Op::kFastGelu, workspaceSize, executor));
    return PhaseOneDone(CheckFastGelu(gradOutput, self, gradInput), Op::kFastGelu, gradOutput, self, gradInput,
                        workspaceSize, executor);
}

aclnnStatus aclnnFastGeluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                  aclrtStream stream) {
    return PhaseTwo(Op::kFastGelu, workspace, workspaceSize, executor, stream);
}

aclnnStatus aclnnLogSigmoidBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                    const aclTensor* buffer, aclTensor* gradInput,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
    RETURN_IF_FAILED(PhaseOneStart(Op::kLogSigmoid, workspaceSize, executor));
    // The buffer is checked, never read: the executor keeps only gradOutput, self and gradInput.
    return PhaseOneDone(CheckLogSigmoid(gradOutput, self, buffer, gradInput), Op::kLogSigmoid, gradOutput, self,
                        gradInput, workspaceSize, executor);
}

aclnnStatus aclnnLogSigmoidBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                    aclrtStream stream) {
    return PhaseTwo(Op::kLogSigmoid, workspace, workspaceSize, executor, stream);
}

aclnnStatus aclnnHardsigmoidBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
    RETURN_IF_FAILED(PhaseOneStart(Op::kHardsigmoid, workspaceSize, executor));
    return PhaseOneDone(CheckHardsigmoid(gradOutput, self, out), Op::kHardsigmoid, gradOutput, self, out,
                        workspaceSize, executor);
}

aclnnStatus aclnnHardsigmoidBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     aclrtStream stream) {
    return PhaseTwo(Op::kHardsigmoid, workspace, workspaceSize, executor, stream);
}

}  // extern "C"
