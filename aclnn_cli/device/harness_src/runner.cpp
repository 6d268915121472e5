// aclnn-runner: runs aclnn-cli cases on a device through the public aclnn API.
//
// The Python side (`aclnn-cli run`) writes one case at a time to stdin in a line format
// (documented in the README, "The harness contract") and reads one reply line per case on
// the reply descriptor: "done <id> <status>", "error <id> <message>" (the case could not run;
// the runner goes on) or "fault <id> <message>" (it failed once launched; the runner ends).
// The device is set up once per process; a case that crashes or hangs costs only itself,
// because the driver starts a fresh runner for the rest.
//
// Usage: aclnn-runner [--device N] [--reply-fd FD]

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "request.h"
#include "runner.h"

namespace runner {
namespace {

// The protocol version in the "ready" line; aclnn-cli refuses a runner that speaks another.
constexpr const char* kProtocol = "aclnn-runner/1";

// Something went wrong once the kernel was launched: the stream and context may be unusable,
// so after this case the process ends and aclnn-cli starts a fresh runner.
struct DeviceFault : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string recent_error() {
    const char* msg = aclGetRecentErrMsg();
    return msg != nullptr && *msg != '\0' ? std::string(" (") + msg + ")" : std::string();
}

void check_acl(aclError ret, const char* what) {
    if (ret != ACL_SUCCESS) {
        throw Failure(std::string(what) + " returned " + std::to_string(ret) + recent_error());
    }
}

// Device memory that frees itself.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
        if (bytes > 0) check_acl(aclrtMalloc(&ptr_, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() {
        if (ptr_ != nullptr) aclrtFree(ptr_);
    }
    void* get() const { return ptr_; }
    size_t size() const { return bytes_; }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

struct TensorDeleter {
    void operator()(aclTensor* t) const { aclDestroyTensor(t); }
};
using TensorHandle = std::unique_ptr<aclTensor, TensorDeleter>;

struct IntArrayDeleter {
    void operator()(aclIntArray* a) const { aclDestroyIntArray(a); }
};
struct BoolArrayDeleter {
    void operator()(aclBoolArray* a) const { aclDestroyBoolArray(a); }
};
using IntArrayHandle = std::unique_ptr<aclIntArray, IntArrayDeleter>;
using BoolArrayHandle = std::unique_ptr<aclBoolArray, BoolArrayDeleter>;

struct ScalarDeleter {
    void operator()(aclScalar* s) const { aclDestroyScalar(s); }
};
using ScalarHandle = std::unique_ptr<aclScalar, ScalarDeleter>;

// An aclScalar of the given dtype holding the request's number (parsed exactly: hex floats).
ScalarHandle make_scalar(aclDataType dtype, const std::string& text) {
    const char* s = text.c_str();
    char* end = nullptr;
    errno = 0;
    union {
        float f;
        double d;
        int32_t i32;
        int64_t i64;
        bool b;
    } v{};
    if (dtype == ACL_FLOAT || dtype == ACL_DOUBLE) {
        double d = std::strtod(s, &end);
        if (dtype == ACL_FLOAT) v.f = static_cast<float>(d);
        else v.d = d;
    } else if (dtype == ACL_INT32 || dtype == ACL_INT64 || dtype == ACL_BOOL) {
        long long i = std::strtoll(s, &end, 10);
        if (dtype == ACL_INT32) v.i32 = static_cast<int32_t>(i);
        else if (dtype == ACL_INT64) v.i64 = i;
        else v.b = i != 0;
    } else {
        throw Failure("scalar dtype " + std::to_string(dtype) + " is not supported by this runner");
    }
    if (end == s || *end != '\0' || errno == ERANGE) throw Failure("malformed scalar value '" + text + "'");
    aclScalar* scalar = aclCreateScalar(&v, dtype);
    if (scalar == nullptr) throw Failure("aclCreateScalar returned nullptr" + recent_error());
    return ScalarHandle(scalar);
}

std::vector<char> read_file(const std::string& path, size_t expected) {
    std::vector<char> data(expected);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) throw Failure("cannot open " + path + ": " + std::strerror(errno));
    size_t got = expected > 0 ? std::fread(data.data(), 1, expected, f) : 0;
    bool longer = std::fgetc(f) != EOF;
    std::fclose(f);
    if (got != expected || longer) {
        throw Failure(path + " does not hold " + std::to_string(expected) + " bytes of storage");
    }
    return data;
}

// Write to a temporary name in the same directory, then rename: never a half-written file.
void write_atomically(const std::string& path, const void* data, size_t size) {
    // ".<name>.tmp-<pid>" beside the target: aclnn-cli's convention, so gen can clear a dead runner's leftovers.
    size_t slash = path.rfind('/');
    size_t cut = slash == std::string::npos ? 0 : slash + 1;
    std::string tmp = path.substr(0, cut) + "." + path.substr(cut) + ".tmp-" + std::to_string(getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw Failure("cannot write " + tmp + ": " + std::strerror(errno));
    const char* p = static_cast<const char*>(data);
    size_t left = size;
    while (left > 0) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            throw Failure("cannot write " + tmp + ": " + std::strerror(err));
        }
        p += n;
        left -= static_cast<size_t>(n);
    }
    if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        throw Failure("cannot write " + path + ": " + std::strerror(err));
    }
}

const OpEntry& find_op(const std::string& name) {
    for (size_t i = 0; i < kOpCount; ++i) {
        if (name == kOps[i].name) return kOps[i];
    }
    throw Failure("this runner was generated without " + name + " (run 'aclnn-cli harness' again)");
}

// The request's argument i must be what the API takes there (a null where it takes a pointer).
void check_kind(const OpEntry& op, size_t i, Kind kind) {
    char want = op.kinds[i], got = kind_code(kind);
    bool pointer = want == 't' || want == 's' || want == 'c' || want == 'l' || want == 'm';
    if (got != want && !(got == 'n' && pointer)) {
        throw Failure(std::string(op.name) + " argument " + std::to_string(i + 1) + ": the request gives kind '" +
                      got + "', the API takes '" + want + "' (run 'aclnn-cli harness' again)");
    }
}

// The attribute objects of one call (aclScalar, aclIntArray, aclBoolArray), destroyed with it.
struct Attributes {
    std::vector<ScalarHandle> scalars;
    std::vector<IntArrayHandle> int_arrays;
    std::vector<BoolArrayHandle> bool_arrays;

    // Fills `arg` from an attribute parameter (tensors are made by run_case).
    void set(const Param& t, Arg& arg) {
        if (t.kind == Kind::Scalar) {
            scalars.push_back(make_scalar(t.dtype, t.value));
            arg.scalar = scalars.back().get();
        } else if (t.kind == Kind::Bool) {
            arg.flag = t.value == "1";
        } else if (t.kind == Kind::String) {
            arg.text.assign(t.value.begin(), t.value.end());
            arg.text.push_back('\0');
        } else if (t.kind == Kind::Int) {
            arg.integer = t.integer;
        } else if (t.kind == Kind::Double) {
            arg.f64 = t.real;
        } else if (t.kind == Kind::Float) {
            arg.f32 = static_cast<float>(t.real);  // (exact: the request was checked to hold a float32 value)
        } else if (t.kind == Kind::IntList) {
            int_arrays.emplace_back(aclCreateIntArray(t.ints.data(), t.ints.size()));
            if (!int_arrays.back()) throw Failure("aclCreateIntArray returned nullptr" + recent_error());
            arg.ints = int_arrays.back().get();
        } else if (t.kind == Kind::BoolList) {
            std::unique_ptr<bool[]> values(new bool[t.ints.size() + 1]);
            for (size_t k = 0; k < t.ints.size(); ++k) values[k] = t.ints[k] != 0;
            bool_arrays.emplace_back(aclCreateBoolArray(values.get(), t.ints.size()));
            if (!bool_arrays.back()) throw Failure("aclCreateBoolArray returned nullptr" + recent_error());
            arg.bools = bool_arrays.back().get();
        }
    }
};

// One case: tensors onto the device, phase one, status, then phase two and the output storage back.
aclnnStatus run_case(const CaseRequest& req, aclrtStream stream) {
    const OpEntry& op = find_op(req.op);
    if (req.params.size() != op.param_count) {
        throw Failure(req.op + " takes " + std::to_string(op.param_count) + " arguments, the request has " +
                      std::to_string(req.params.size()));
    }
    std::vector<std::unique_ptr<DeviceBuffer>> storage;
    std::vector<TensorHandle> handles;
    Attributes attributes;
    CallArgs args;
    for (size_t i = 0; i < req.params.size(); ++i) {
        const Param& t = req.params[i];
        check_kind(op, i, t.kind);
        storage.emplace_back();
        handles.emplace_back();
        args.args.emplace_back();
        Arg& arg = args.args.back();
        attributes.set(t, arg);
        if (t.kind != Kind::Tensor) continue;
        size_t bytes = t.storage_bytes;
        std::vector<char> host = read_file(t.file, bytes);
        storage.back() = std::make_unique<DeviceBuffer>(bytes);
        if (bytes > 0) {
            check_acl(aclrtMemcpy(storage.back()->get(), bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE),
                      "aclrtMemcpy (host to device)");
        }
        aclTensor* tensor = aclCreateTensor(t.dims.data(), t.dims.size(), t.dtype, t.strides.data(), t.offset,
                                            t.format, t.storage_dims.data(), t.storage_dims.size(),
                                            storage.back()->get());
        if (tensor == nullptr) throw Failure("aclCreateTensor returned nullptr" + recent_error());
        handles.back().reset(tensor);
        arg.tensor = tensor;
    }

    uint64_t workspace_size = 0;
    aclOpExecutor* executor = nullptr;
    aclnnStatus status = op.phase_one(args, &workspace_size, &executor);
    std::string text = std::to_string(status) + "\n";
    write_atomically(req.status_path, text.data(), text.size());
    if (status != 0) return status;

    DeviceBuffer workspace(static_cast<size_t>(workspace_size));
    std::vector<std::vector<char>> results(req.params.size());
    try {
        aclnnStatus ret = op.phase_two(workspace.get(), workspace_size, executor, stream);
        if (ret != 0) throw Failure(req.op + " (phase two) returned " + std::to_string(ret) + recent_error());
        check_acl(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
        for (size_t i = 0; i < req.params.size(); ++i) {
            const Param& t = req.params[i];
            if (!t.output || t.kind != Kind::Tensor || t.dump.empty() || storage[i]->size() == 0) continue;
            results[i].resize(storage[i]->size());
            check_acl(aclrtMemcpy(results[i].data(), results[i].size(), storage[i]->get(), results[i].size(),
                                  ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy (device to host)");
        }
    } catch (const std::exception& e) {
        // Work may still be queued on the stream: let it finish before the buffers are freed.
        aclrtSynchronizeStream(stream);
        throw DeviceFault(e.what());
    }
    for (size_t i = 0; i < req.params.size(); ++i) {
        const Param& t = req.params[i];
        if (t.output && t.kind == Kind::Tensor && !t.dump.empty()) {
            write_atomically(t.dump, results[i].data(), results[i].size());
        }
    }
    return status;
}

// Replies go to their own descriptor, so anything a library prints on stdout cannot be mistaken for one.
class Replies {
public:
    explicit Replies(int fd) : out_(fd == 1 ? stdout : fdopen(fd, "w")) {
        if (out_ == nullptr) {
            std::fprintf(stderr, "aclnn-runner: cannot write replies to descriptor %d\n", fd);
            std::exit(2);
        }
    }
    void say(const std::string& line) {
        std::string one = line;
        for (char& c : one) {
            if (c == '\n' || c == '\r') c = ' ';
        }
        std::fprintf(out_, "%s\n", one.c_str());
        std::fflush(out_);
    }

private:
    FILE* out_;
};

int parse_int(const char* text, const char* what) {
    char* end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < 0 || v > 1 << 20) {
        std::fprintf(stderr, "aclnn-runner: %s must be a small non-negative integer, got '%s'\n", what, text);
        std::exit(2);
    }
    return static_cast<int>(v);
}

}  // namespace
}  // namespace runner

int main(int argc, char** argv) {
    using namespace runner;
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a runner whose driver died must not keep the device
    int device = 0, reply_fd = 1;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if ((arg == "--device" || arg == "--reply-fd") && i + 1 < argc) {
            (arg == "--device" ? device : reply_fd) = parse_int(argv[++i], arg.c_str());
        } else {
            std::fprintf(stderr, "usage: aclnn-runner [--device N] [--reply-fd FD] < requests\n");
            return 2;
        }
    }
    Replies replies(reply_fd);
    aclrtStream stream = nullptr;
    try {
        check_acl(aclInit(nullptr), "aclInit");
        check_acl(aclrtSetDevice(device), "aclrtSetDevice");
        check_acl(aclrtCreateStream(&stream), "aclrtCreateStream");
    } catch (const std::exception& e) {
        replies.say(std::string("fatal ") + e.what());
        return 3;
    }
    const char* soc = aclrtGetSocName();
    replies.say(std::string("ready ") + kProtocol + " " + (soc != nullptr && *soc != '\0' ? soc : "unknown"));

    CaseRequest req;
    while (true) {
        try {
            if (!read_request(std::cin, req)) break;
        } catch (const std::exception& e) {  // the request format drifted: say so and end
            replies.say(std::string("fatal ") + e.what());
            return 2;
        }
        try {
            aclnnStatus status = run_case(req, stream);
            replies.say("done " + req.id + " " + std::to_string(status));
        } catch (const DeviceFault& e) {
            replies.say("fault " + req.id + " " + e.what());
            return 4;  // the device may be unusable: aclnn-cli starts a fresh runner
        } catch (const std::exception& e) {
            replies.say("error " + req.id + " " + e.what());
        }
    }
    aclrtDestroyStream(stream);
    aclrtResetDevice(device);
    aclFinalize();
    return 0;
}
