// libascendcl of the stub: the runtime on host memory. See README.md for the behaviour.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "stub.h"

namespace {

constexpr int32_t kDeviceCount = 8;

struct Stream {
    bool hung = false;
    bool faulted = false;  // a kernel raised an exception: the stream stays unusable, as on a device
};

struct State {
    std::mutex mu;
    int init = 0;  // 0 never, 1 initialized, 2 finalized
    int device_refs[kDeviceCount] = {};
    int32_t current = -1;
    std::map<uintptr_t, uint64_t> allocations;  // base -> size
    std::set<Stream*> streams;
    bool default_stream_hung = false;
    bool default_stream_faulted = false;
};

State& S() {
    static State* s = new State;  // never destroyed: usable from atexit handlers and other libs
    return *s;
}

thread_local std::string pending_errors;  // newest first, one per line
thread_local std::string returned_errors;

void Log(const char* call) {
    const char* path = std::getenv("ACLNN_STUB_LOG");
    if (path == nullptr || *path == '\0') return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::fprintf(stderr, "aclnn-stub: cannot open ACLNN_STUB_LOG %s\n", path);
        return;
    }
    std::string line = std::string(call) + " pid=" + std::to_string(getpid()) + "\n";
    ssize_t n = write(fd, line.data(), line.size());  // one write: lines of concurrent processes stay whole
    (void)n;
    close(fd);
}

aclError Fail(aclError code, const std::string& msg) {
    stub::ReportError(msg);
    return code;
}

// The allocation holding p, or allocations.end(). Caller holds the lock.
std::map<uintptr_t, uint64_t>::iterator FindAllocation(State& s, const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p);
    auto it = s.allocations.upper_bound(a);
    if (it == s.allocations.begin()) return s.allocations.end();
    --it;
    return a < it->first + it->second ? it : s.allocations.end();
}

// Bytes from p to the end of its allocation, or 0 if p is not device memory. Caller holds the lock.
uint64_t RoomAt(State& s, const void* p) {
    auto it = FindAllocation(s, p);
    return it == s.allocations.end() ? 0 : it->first + it->second - reinterpret_cast<uintptr_t>(p);
}

stub::Defect ParseDefect() {
    stub::Defect d;
    const char* kind = std::getenv("ACLNN_STUB_DEFECT");
    std::string k = kind ? kind : "";
    if (k.empty() || k == "none") d.kind = stub::DefectKind::kNone;
    else if (k == "wrong-values") d.kind = stub::DefectKind::kWrongValues;
    else if (k == "write-outside") d.kind = stub::DefectKind::kWriteOutside;
    else if (k == "crash") d.kind = stub::DefectKind::kCrash;
    else if (k == "hang") d.kind = stub::DefectKind::kHang;
    else if (k == "sync-error") d.kind = stub::DefectKind::kSyncError;
    else d.error = "ACLNN_STUB_DEFECT=" + k + ": expected wrong-values, write-outside, crash, hang or sync-error";
    if (const char* op = std::getenv("ACLNN_STUB_DEFECT_OP")) d.op = op;
    if (const char* n = std::getenv("ACLNN_STUB_DEFECT_NUMEL"); n != nullptr && *n != '\0') {
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(n, &end, 10);
        if (errno != 0 || *end != '\0' || v < 0) d.error = std::string("ACLNN_STUB_DEFECT_NUMEL=") + n + ": expected a count";
        else d.numel = v;
    }
    return d;
}

}  // namespace

// ---------------------------------------------------------------- internals for the other libraries

namespace stub {

void ReportError(const std::string& msg) {
    pending_errors = pending_errors.empty() ? msg : msg + "\n" + pending_errors;
}

bool DeviceReady() {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.init == 1 && s.current >= 0 && s.device_refs[s.current] > 0;
}

bool IsDeviceRange(const void* p, uint64_t bytes) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    uint64_t room = RoomAt(s, p);
    return room > 0 && bytes <= room;
}

bool IsStream(aclrtStream stream) {
    if (stream == nullptr) return true;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.streams.count(static_cast<Stream*>(stream)) != 0;
}

void HangStream(aclrtStream stream) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (stream == nullptr) s.default_stream_hung = true;
    else static_cast<Stream*>(stream)->hung = true;
}

void FaultStream(aclrtStream stream) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (stream == nullptr) s.default_stream_faulted = true;
    else static_cast<Stream*>(stream)->faulted = true;
}

std::string Product() {
    std::string soc = aclrtGetSocName();
    auto starts = [&](const char* p) { return soc.rfind(p, 0) == 0; };
    if (starts("Ascend950")) return "950";
    if (starts("Ascend910_93")) return "A3";
    if (starts("Ascend910B")) return "A2";
    if (starts("Ascend910")) return "910";
    if (starts("Ascend310P")) return "310P";
    return "other";
}

const Defect& DefectConfig() {
    static const Defect d = ParseDefect();
    return d;
}

}  // namespace stub

// ---------------------------------------------------------------- the public API

extern "C" {

const char* aclrtGetSocName() {
    const char* soc = std::getenv("ACLNN_STUB_SOC");
    return soc != nullptr && *soc != '\0' ? soc : "Ascend910B1";
}

const char* aclGetRecentErrMsg() {
    if (pending_errors.empty()) return nullptr;  // as the real one: nullptr when there is nothing
    returned_errors.swap(pending_errors);
    pending_errors.clear();
    return returned_errors.c_str();
}

aclError aclInit(const char* configPath) {
    Log("aclInit");
    (void)configPath;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.init != 0) return Fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: called more than once in this process");
    const stub::Defect& d = stub::DefectConfig();
    if (!d.error.empty()) {
        std::fprintf(stderr, "aclnn-stub: %s\n", d.error.c_str());
        return Fail(ACL_ERROR_INVALID_PARAM, "aclInit: " + d.error);
    }
    s.init = 1;
    return ACL_SUCCESS;
}

aclError aclFinalize() {
    Log("aclFinalize");
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.init == 0) return Fail(ACL_ERROR_UNINITIALIZE, "aclFinalize: aclInit was not called");
    if (s.init == 2) return Fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: called more than once");
    s.init = 2;
    if (!s.allocations.empty() || !s.streams.empty()) {
        std::fprintf(stderr, "aclnn-stub: aclFinalize with %zu device allocation(s) and %zu stream(s) not freed\n",
                     s.allocations.size(), s.streams.size());
    }
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
    Log("aclrtSetDevice");
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.init != 1) return Fail(ACL_ERROR_UNINITIALIZE, "aclrtSetDevice: aclInit was not called");
    if (deviceId < 0 || deviceId >= kDeviceCount) {
        return Fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice: no device " + std::to_string(deviceId));
    }
    ++s.device_refs[deviceId];
    s.current = deviceId;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
    Log("aclrtResetDevice");
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (deviceId < 0 || deviceId >= kDeviceCount || s.device_refs[deviceId] == 0) {
        return Fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: device " + std::to_string(deviceId) + " is not set");
    }
    --s.device_refs[deviceId];
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
    (void)policy;
    if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr must not be null");
    if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size must be greater than 0");
    if (!stub::DeviceReady()) return Fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtMalloc: no device set (aclrtSetDevice)");
    void* p = std::malloc(size);
    if (p == nullptr) return Fail(ACL_ERROR_BAD_ALLOC, "aclrtMalloc: out of memory for " + std::to_string(size) + " bytes");
    std::memset(p, 0xff, size);  // fresh device memory is garbage: all-ones reads as NaN in every float type
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    s.allocations[reinterpret_cast<uintptr_t>(p)] = size;
    *devPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFree(void* devPtr) {
    if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr must not be null");
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
    if (it == s.allocations.end()) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtFree: pointer was not returned by aclrtMalloc, or is already freed");
    }
    s.allocations.erase(it);
    std::free(devPtr);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
    if (count == 0) return ACL_SUCCESS;  // as the real one: nothing to copy, nothing checked
    if (dst == nullptr || src == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: dst and src must not be null");
    bool dst_dev, src_dev;
    switch (kind) {
        case ACL_MEMCPY_HOST_TO_HOST: dst_dev = false; src_dev = false; break;
        case ACL_MEMCPY_HOST_TO_DEVICE: case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: dst_dev = true; src_dev = false; break;
        case ACL_MEMCPY_DEVICE_TO_HOST: dst_dev = false; src_dev = true; break;
        case ACL_MEMCPY_DEVICE_TO_DEVICE: case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE:
            dst_dev = true; src_dev = true; break;
        case ACL_MEMCPY_DEFAULT: {
            State& s = S();
            std::lock_guard<std::mutex> lock(s.mu);
            dst_dev = RoomAt(s, dst) > 0;
            src_dev = RoomAt(s, src) > 0;
            break;
        }
        default:
            return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: invalid kind " + std::to_string(static_cast<int>(kind)));
    }
    if (count > destMax) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: count " + std::to_string(count) + " > destMax " +
                                                    std::to_string(destMax));
    }
    if ((dst_dev || src_dev) && !stub::DeviceReady()) {
        return Fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtMemcpy: no device set (aclrtSetDevice)");
    }
    State& s = S();
    std::unique_lock<std::mutex> lock(s.mu);
    if (dst_dev) {
        uint64_t room = RoomAt(s, dst);
        if (room == 0) return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: dst is not device memory from aclrtMalloc");
        if (destMax > room) {
            return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: destMax " + std::to_string(destMax) +
                                                        " exceeds the destination allocation (" + std::to_string(room) +
                                                        " bytes from dst)");
        }
    }
    if (src_dev) {
        uint64_t room = RoomAt(s, src);
        if (room == 0) return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: src is not device memory from aclrtMalloc");
        if (count > room) {
            return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: count " + std::to_string(count) +
                                                        " exceeds the source allocation (" + std::to_string(room) +
                                                        " bytes from src)");
        }
    }
    lock.unlock();
    std::memmove(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
    if (stream == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream must not be null");
    if (!stub::DeviceReady()) return Fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtCreateStream: no device set (aclrtSetDevice)");
    auto* st = new Stream;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    s.streams.insert(st);
    *stream = st;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (stream == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: stream must not be null");
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    auto* st = static_cast<Stream*>(stream);
    if (s.streams.erase(st) == 0) return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStream: unknown stream");
    delete st;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    bool hung, faulted;
    {
        State& s = S();
        std::lock_guard<std::mutex> lock(s.mu);
        auto* st = static_cast<Stream*>(stream);
        if (st != nullptr && s.streams.count(st) == 0) {
            return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStream: unknown stream");
        }
        hung = st != nullptr ? st->hung : s.default_stream_hung;
        faulted = st != nullptr ? st->faulted : s.default_stream_faulted;
    }
    while (hung) pause();  // the "hang" defect: the device never finishes (until a signal kills us)
    if (faulted) return Fail(ACL_ERROR_RT_AICORE_EXCEPTION, "aclrtSynchronizeStream: aicore exception");
    return ACL_SUCCESS;
}

}  // extern "C"
