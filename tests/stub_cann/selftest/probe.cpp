// Phase-one probe: reads calls from stdin, one per line, prints each call's GetWorkspaceSize status.
//
//   <op> <tensor>...     op: silu | fast_gelu | log_sigmoid | hardsigmoid
//                        tensor: null | <dtype>:<d0>x<d1>x...  (dtype float32|float16|bfloat16|float64;
//                        "float32:" is 0-dim), in the API's argument order
//
// Lets a test compare the stub's phase one with another implementation of the same docs.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_fast_gelu_backward.h"
#include "aclnnop/aclnn_hardsigmoid_backward.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"
#include "aclnnop/aclnn_silu_backward.h"

namespace {

aclDataType DType(const std::string& s) {
    if (s == "float32") return ACL_FLOAT;
    if (s == "float16") return ACL_FLOAT16;
    if (s == "bfloat16") return ACL_BF16;
    if (s == "float64") return ACL_DOUBLE;
    return ACL_DT_UNDEFINED;
}

// A tensor for phase one only: its storage is never touched, so one shared device buffer backs all.
aclTensor* Make(const std::string& tok, void* dev) {
    if (tok == "null") return nullptr;
    size_t colon = tok.find(':');
    aclDataType dt = DType(tok.substr(0, colon));
    std::vector<int64_t> dims;
    std::stringstream ss(tok.substr(colon + 1));
    for (std::string d; std::getline(ss, d, 'x');) dims.push_back(std::stoll(d));
    std::vector<int64_t> strides(dims.size(), 0);  // every view element at storage element 0
    int64_t one = 1;
    return aclCreateTensor(dims.data(), dims.size(), dt, strides.data(), 0, ACL_FORMAT_ND, &one, 1, dev);
}

}  // namespace

int main() {
    aclrtStream stream = nullptr;
    void* dev = nullptr;
    if (aclInit(nullptr) != 0 || aclrtSetDevice(0) != 0 || aclrtCreateStream(&stream) != 0 ||
        aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST) != 0) {
        return 1;
    }
    void* ws = nullptr;
    aclrtMalloc(&ws, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
    for (std::string line; std::getline(std::cin, line);) {
        std::stringstream ss(line);
        std::string op, tok;
        ss >> op;
        std::vector<aclTensor*> t;
        while (ss >> tok) t.push_back(Make(tok, dev));
        uint64_t size = 0;
        aclOpExecutor* e = nullptr;
        aclnnStatus st = -1;
        if (op == "silu" && t.size() == 3) st = aclnnSiluBackwardGetWorkspaceSize(t[0], t[1], t[2], &size, &e);
        if (op == "fast_gelu" && t.size() == 3) st = aclnnFastGeluBackwardGetWorkspaceSize(t[0], t[1], t[2], &size, &e);
        if (op == "log_sigmoid" && t.size() == 4) {
            st = aclnnLogSigmoidBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], &size, &e);
        }
        if (op == "hardsigmoid" && t.size() == 3) st = aclnnHardsigmoidBackwardGetWorkspaceSize(t[0], t[1], t[2], &size, &e);
        if (st == 0) {
            // Free the executor by running it; the output is the shared element, harmless.
            aclnnSiluBackward(ws, 4096, e, stream);
        }
        aclGetRecentErrMsg();
        for (aclTensor* x : t) aclDestroyTensor(x);
        std::printf("%d\n", st);
    }
    aclrtFree(ws);
    aclrtFree(dev);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
