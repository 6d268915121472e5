// libopapi of the stub: what every operator shares (see opapi.h): the phase-one checks,
// executors, phase two (runtime checks, the elementwise loop, rounding, views) and the defects.
#include "opapi.h"
#include "elements.h"

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
    std::shared_ptr<const stub::Job> job;  // an op that is not elementwise: its tensors and computation
};

namespace stub {

const DTypes kFloats = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
const DTypes kFp32Fp16 = {ACL_FLOAT, ACL_FLOAT16};
const DTypes kSmallInts = {ACL_INT32, ACL_INT8, ACL_UINT8};
const DTypes kOutputTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};


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

namespace {

// What every phase one starts with: the null workspaceSize/executor and device checks.
aclnnStatus Admit(const OpDef& def, uint64_t* workspaceSize, aclOpExecutor** executor) {
    std::string api = std::string(def.api) + "GetWorkspaceSize: ";
    if (workspaceSize == nullptr || executor == nullptr) {
        ReportError(api + "workspaceSize and executor must not be null");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!DeviceReady()) {
        ReportError(api + "no device set (aclInit, aclrtSetDevice)");
        return ACLNN_ERR_RUNTIME_ERROR;
    }
    return ACLNN_SUCCESS;
}

// A live executor asking for a workspace if the call computes anything.
aclnnStatus Issue(aclOpExecutor* e, int64_t numel, uint64_t* workspaceSize, aclOpExecutor** executor) {
    e->workspace = numel > 0 ? kWorkspaceBytes : 0;
    {
        std::lock_guard<std::mutex> lock(executors_mu);
        Executors().insert(e);
    }
    *workspaceSize = e->workspace;
    *executor = e;
    return ACLNN_SUCCESS;
}

}  // namespace

aclnnStatus PhaseOne(const OpDef& def, uint64_t* workspaceSize, aclOpExecutor** executor, const aclTensor* dy,
                     const aclTensor* x, const aclTensor* out, const Check& check) {
    RETURN_IF_FAILED(Admit(def, workspaceSize, executor));
    Checker c(def);
    RETURN_IF_FAILED(check(c));
    auto* e = new aclOpExecutor{&def, *dy, *x, *out, c.compute, c.ties_away, c.attrs, 0, nullptr};
    if (e->compute == ACL_DT_UNDEFINED) e->compute = out->dtype;
    return Issue(e, Numel(out->view), workspaceSize, executor);
}

int Job::Add(const aclTensor* t, bool output) {
    if (t == nullptr) return -1;
    tensors.push_back(*t);
    if (output) outputs.push_back(tensors.size() - 1);
    return static_cast<int>(tensors.size() - 1);
}

int64_t Job::Work() const {
    int64_t n = 0;
    for (size_t i : outputs) n += Numel(tensors[i].view);
    return n;
}

void Job::Write(int at, const std::vector<float>& v, bool negate) const {
    if (at >= 0) WriteFloats(T(at), v, T(at).dtype, negate);
}

aclnnStatus PhaseOneJob(const OpDef& def, uint64_t* workspaceSize, aclOpExecutor** executor, const Check& check,
                        const std::function<Job(const Checker&)>& make) {
    RETURN_IF_FAILED(Admit(def, workspaceSize, executor));
    Checker c(def);
    RETURN_IF_FAILED(check(c));
    auto job = std::make_shared<const Job>(make(c));
    auto* e = new aclOpExecutor{&def, {}, {}, {}, ACL_FLOAT, false, c.attrs, 0, job};
    return Issue(e, job->run ? job->Work() : 0, workspaceSize, executor);
}

// ---------------------------------------------------------------- phase two

namespace {

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


// The elementwise loop of an integer output: exact loads, the integer kernel, saturated stores.
void ComputeInt(const aclOpExecutor& e, KernelInt kernel, bool wrong_values) {
    int64_t n = Numel(e.out.view);
    std::vector<int64_t> result(static_cast<size_t>(n));  // all reads first: the output may alias an input
    Walker in(e.out.view, {&e.dy, &e.x});
    for (int64_t i = 0; i < n; ++i, in.Next()) {
        int64_t v = kernel(LoadInt(e.dy, in.At(0)), LoadInt(e.x, in.At(1)), e.attrs);
        result[static_cast<size_t>(i)] = wrong_values ? ~v : v;  // (~v: never v, for unsigned dtypes too)
    }
    Walker w(e.out.view, {&e.out});
    for (int64_t i = 0; i < n; ++i, w.Next()) StoreInt(e.out, w.At(0), result[static_cast<size_t>(i)]);
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
    std::vector<const aclTensor*> touched = {&e->dy, &e->x, &e->out};
    if (e->job) {
        touched.clear();
        for (const aclTensor& t : e->job->tensors) touched.push_back(&t);
    }
    for (const aclTensor* t : touched) {
        uint64_t bytes = StorageBytes(*t);
        if (bytes > 0 && !IsDeviceRange(t->data, bytes)) {
            return RunFailed(ACLNN_ERR_RUNTIME_ERROR, def, "a tensor's storage (" + std::to_string(bytes) +
                                                               " bytes) is not inside one aclrtMalloc allocation");
        }
    }

    const Defect& defect = DefectConfig();
    bool silent = e->job && e->job->outputs.empty();  // nothing to write (LayerNorm's outputMask all false)
    const aclTensor& out = e->job && !silent ? e->job->First() : e->out;  // the output a defect corrupts
    int64_t n = silent ? 0 : Numel(out.view);
    DefectKind kind = DefectApplies(defect, def, n) ? defect.kind : DefectKind::kNone;
    if (kind == DefectKind::kCrash) {
        std::signal(SIGSEGV, SIG_DFL);  // not a sanitizer's handler: die of the signal itself
        std::raise(SIGSEGV);
    }
    bool wrong = kind == DefectKind::kWrongValues;
    if (e->workspace > 0) std::memset(workspace, 0xa5, e->workspace);  // the kernel scribbles on its workspace
    if (e->job) {
        if (e->job->run) e->job->run(*e->job, wrong);
    } else if (n > 0) {
        if (IsIntegral(e->out.dtype) && def.kernel_int != nullptr) {
            ComputeInt(*e, def.kernel_int, wrong);
        } else if (e->compute == ACL_DOUBLE) {
            Compute(*e, def.kernel64, wrong);
        } else {
            Compute(*e, def.kernel, wrong);
        }
    }
    if (kind == DefectKind::kWriteOutside && !silent && StorageBytes(out) > 0) CorruptOutside(out, n);
    if (kind == DefectKind::kHang) HangStream(stream);
    if (kind == DefectKind::kSyncError) FaultStream(stream);
    return ACLNN_SUCCESS;
}

}  // namespace stub
