// aclnnKindsEcho for tests: phase one prints the bits of the double and the float it received on stderr
// ("kinds-echo eps=<16 hex digits> momentum=<8 hex digits>"), so a test can compare them with the case's
// values bit for bit; phase two does nothing (the output keeps its initial storage).
#include "aclnnop/aclnn_kinds_echo.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" aclnnStatus aclnnKindsEchoGetWorkspaceSize(const aclTensor*, const aclTensor*, double eps, float momentum,
                                                      aclTensor*, uint64_t* workspaceSize, aclOpExecutor** executor) {
    uint64_t eps_bits = 0;
    uint32_t momentum_bits = 0;
    std::memcpy(&eps_bits, &eps, sizeof eps_bits);
    std::memcpy(&momentum_bits, &momentum, sizeof momentum_bits);
    std::fprintf(stderr, "kinds-echo eps=%016llx momentum=%08lx\n", static_cast<unsigned long long>(eps_bits),
                 static_cast<unsigned long>(momentum_bits));
    *workspaceSize = 0;
    *executor = nullptr;
    return 0;
}

extern "C" aclnnStatus aclnnKindsEcho(void*, uint64_t, aclOpExecutor*, aclrtStream) { return 0; }
