// aclnn-runner: the request a case arrives as (the line format of "The harness contract" in aclnn-cli's
// README), parsed strictly: a malformed line is a Failure naming it.
#pragma once

#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner.h"

namespace runner {

// A case that cannot run (unreadable file, failed allocation, phase one's bookkeeping): the runner goes on.
struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// One argument of a case, as the request describes it: a tensor, an attribute, or a null pointer.
enum class Kind { Null, Tensor, Scalar, Bool, String, Int, IntList, BoolList, Double, Float };

// The code of a kind in OpEntry::kinds ('n' for Null, which the op's pointer kinds accept).
char kind_code(Kind kind);

struct Param {
    Kind kind = Kind::Null;
    bool output = false;
    aclDataType dtype = ACL_FLOAT;
    aclFormat format = ACL_FORMAT_ND;
    size_t itemsize = 0;
    std::vector<int64_t> dims, strides, storage_dims;
    int64_t offset = 0;
    size_t storage_bytes = 0;
    std::string file;  // storage bytes to load (the initial output storage, for an output)
    std::string dump;  // where the whole output storage goes after the call
    std::string value;  // a scalar's number as text (hex floats exact), a bool's 0/1, a string
    int64_t integer = 0;  // an int64_t attribute
    std::vector<int64_t> ints;  // an int_list's values, a bool_list's as 0/1
    double real = 0.0;  // a double's value, a float's (exactly a float32 value)
};

struct CaseRequest {
    std::string id, op, status_path;
    std::vector<Param> params;
};

// Reads one case; false at the end of input.
bool read_request(std::istream& in, CaseRequest& req);

}  // namespace runner
