// libnnopbase of the stub: aclTensor and aclScalar.
#include <mutex>
#include <set>

#include "aclnn/aclnn_base.h"
#include "opdev/op_errno.h"
#include "stub.h"

namespace {

std::mutex mu;
std::set<const void*>& Live() {
    static auto* live = new std::set<const void*>;  // tensors and scalars not yet destroyed
    return *live;
}

aclTensor* Refuse(const std::string& why) {
    stub::ReportError("aclCreateTensor: " + why);
    return nullptr;
}

bool Product(const int64_t* dims, uint64_t n, int64_t* out) {
    int64_t p = 1;
    for (uint64_t i = 0; i < n; ++i) {
        if (__builtin_mul_overflow(p, dims[i], &p)) return false;
    }
    *out = p;
    return true;
}

}  // namespace

extern "C" {

aclnnStatus aclnnInit(const char* configPath) {
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize() { return ACLNN_SUCCESS; }

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t* stride,
                           int64_t offset, aclFormat format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
    constexpr uint64_t kMaxDims = 64;  // the ops accept at most 8; more is kept so that they can refuse it
    if (viewDimsNum > kMaxDims || storageDimsNum > kMaxDims) return Refuse("too many dims");
    if (viewDimsNum > 0 && (viewDims == nullptr || stride == nullptr)) return Refuse("viewDims and stride must not be null");
    if (storageDimsNum > 0 && storageDims == nullptr) return Refuse("storageDims must not be null");
    if (stub::ElementSize(dataType) == 0) return Refuse("unsupported dataType " + std::to_string(dataType));
    if (offset < 0) return Refuse("negative offset");
    for (uint64_t i = 0; i < viewDimsNum; ++i) {
        if (viewDims[i] < 0 || stride[i] < 0) return Refuse("negative view dim or stride");
    }
    for (uint64_t i = 0; i < storageDimsNum; ++i) {
        if (storageDims[i] < 0) return Refuse("negative storage dim");
    }
    int64_t view_numel, storage_numel, storage_bytes;
    if (!Product(viewDims, viewDimsNum, &view_numel) || !Product(storageDims, storageDimsNum, &storage_numel) ||
        __builtin_mul_overflow(storage_numel, static_cast<int64_t>(stub::ElementSize(dataType)), &storage_bytes)) {
        return Refuse("dims overflow");
    }
    if (view_numel > 0) {  // every view element must lie inside the storage
        int64_t last = offset;
        for (uint64_t i = 0; i < viewDimsNum; ++i) {
            int64_t span;
            if (__builtin_mul_overflow(viewDims[i] - 1, stride[i], &span) || __builtin_add_overflow(last, span, &last)) {
                return Refuse("view overflows");
            }
        }
        if (last >= storage_numel) {
            return Refuse("view reaches storage element " + std::to_string(last) + " but the storage has " +
                          std::to_string(storage_numel) + " elements");
        }
    }
    if (tensorData == nullptr && storage_numel > 0) return Refuse("tensorData is null for a non-empty storage");

    auto* t = new aclTensor;
    t->view.assign(viewDims, viewDims + viewDimsNum);
    t->strides.assign(stride, stride + viewDimsNum);
    t->offset = offset;
    t->format = format;
    t->storage.assign(storageDims, storageDims + storageDimsNum);
    t->dtype = dataType;
    t->data = tensorData;
    std::lock_guard<std::mutex> lock(mu);
    Live().insert(t);
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
    if (tensor == nullptr) return ACLNN_SUCCESS;
    std::lock_guard<std::mutex> lock(mu);
    if (Live().erase(tensor) == 0) {
        stub::ReportError("aclDestroyTensor: not a live tensor (destroyed twice?)");
        return ACLNN_ERR_PARAM_INVALID;
    }
    delete tensor;
    return ACLNN_SUCCESS;
}

aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
    uint64_t size = stub::ElementSize(dataType);
    if (value == nullptr || size == 0) {
        stub::ReportError("aclCreateScalar: null value or unsupported dataType");
        return nullptr;
    }
    auto* s = new aclScalar;
    s->dtype = dataType;
    s->bytes.assign(static_cast<const uint8_t*>(value), static_cast<const uint8_t*>(value) + size);
    std::lock_guard<std::mutex> lock(mu);
    Live().insert(s);
    return s;
}

aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
    if (scalar == nullptr) return ACLNN_SUCCESS;
    std::lock_guard<std::mutex> lock(mu);
    if (Live().erase(scalar) == 0) {
        stub::ReportError("aclDestroyScalar: not a live scalar (destroyed twice?)");
        return ACLNN_ERR_PARAM_INVALID;
    }
    delete scalar;
    return ACLNN_SUCCESS;
}

}  // extern "C"
