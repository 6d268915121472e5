// libnnopbase of the stub: aclTensor, aclScalar, aclIntArray and aclBoolArray.
#include <map>
#include <mutex>

#include "aclnn/aclnn_base.h"
#include "opdev/op_errno.h"
#include "stub.h"

namespace {

std::mutex mu;
// Tensors, scalars and int arrays not yet destroyed -> which of them.
std::map<const void*, std::string>& Live() {
    static auto* live = new std::map<const void*, std::string>;
    return *live;
}

template <class T>
T* Track(T* object, const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    Live()[object] = what;
    return object;
}

// Deletes a live object of that kind made by an aclCreate* call; anything else is refused.
template <class T>
aclnnStatus Untrack(const T* object, const char* api, const char* what) {
    if (object == nullptr) return ACLNN_SUCCESS;
    std::lock_guard<std::mutex> lock(mu);
    auto it = Live().find(object);
    if (it == Live().end() || it->second != what) {
        stub::ReportError(std::string(api) + ": not a live " + what + " (destroyed twice?)");
        return ACLNN_ERR_PARAM_INVALID;
    }
    Live().erase(it);
    delete object;
    return ACLNN_SUCCESS;
}

// aclCreateIntArray / aclCreateBoolArray: a tracked copy of `size` values (null `value` with size > 0: nullptr).
template <class A, class V>
A* CreateArray(const V* value, uint64_t size, const char* api, const char* what) {
    if (value == nullptr && size > 0) {
        stub::ReportError(std::string(api) + ": null value with size " + std::to_string(size));
        return nullptr;
    }
    auto* a = new A;
    if (size > 0) a->values.assign(value, value + size);
    return Track(a, what);
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
    return Track(t, "tensor");
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) { return Untrack(tensor, "aclDestroyTensor", "tensor"); }

aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
    uint64_t size = stub::ElementSize(dataType);
    if (value == nullptr || size == 0) {
        stub::ReportError("aclCreateScalar: null value or unsupported dataType");
        return nullptr;
    }
    auto* s = new aclScalar;
    s->dtype = dataType;
    s->bytes.assign(static_cast<const uint8_t*>(value), static_cast<const uint8_t*>(value) + size);
    return Track(s, "scalar");
}

aclnnStatus aclDestroyScalar(const aclScalar* scalar) { return Untrack(scalar, "aclDestroyScalar", "scalar"); }

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
    return CreateArray<aclIntArray>(value, size, "aclCreateIntArray", "int array");
}

aclnnStatus aclDestroyIntArray(const aclIntArray* array) { return Untrack(array, "aclDestroyIntArray", "int array"); }

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
    return CreateArray<aclBoolArray>(value, size, "aclCreateBoolArray", "bool array");
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) { return Untrack(array, "aclDestroyBoolArray", "bool array"); }

}  // extern "C"
