// aclnn-runner: parsing of the request lines (request.h).
#include "request.h"

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace runner {

char kind_code(Kind kind) {
    switch (kind) {
        case Kind::Tensor: return 't';
        case Kind::Scalar: return 's';
        case Kind::Bool: return 'b';
        case Kind::String: return 'c';
        case Kind::Int: return 'i';
        case Kind::IntList: return 'l';
        case Kind::BoolList: return 'm';
        case Kind::Double: return 'd';
        case Kind::Float: return 'f';
        default: return 'n';
    }
}

namespace {

// The next word as a decimal int64 (the whole word, in range).
int64_t parse_int64(std::istringstream& words, const std::string& line) {
    std::string word;
    words >> word;
    char* end = nullptr;
    errno = 0;
    long long v = word.empty() ? 0 : std::strtoll(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0' || errno == ERANGE) throw Failure("malformed integer in line: " + line);
    return static_cast<int64_t>(v);
}

// The line's last word as a double, bit-exact: a hex float (or inf, -inf, nan) as run.py writes it. A value
// strtod would have to round (ERANGE) is refused; for a float, so is one that float32 does not hold exactly.
double parse_real(std::istringstream& words, const std::string& line, bool single) {
    std::string word, extra;
    words >> word >> extra;
    const char* s = word.c_str();
    char* end = nullptr;
    errno = 0;
    double v = word.empty() ? 0.0 : std::strtod(s, &end);
    if (word.empty() || *end != '\0' || errno == ERANGE || !extra.empty()) {
        throw Failure("malformed number in line: " + line);
    }
    bool finite = std::isfinite(v);
    if (single && finite && (std::fabs(v) > FLT_MAX || static_cast<double>(static_cast<float>(v)) != v)) {
        throw Failure("not a float32 value in line: " + line);
    }
    return v;
}

size_t storage_size(const std::vector<int64_t>& dims, size_t itemsize) {
    size_t bytes = itemsize;
    for (int64_t d : dims) {
        if (d < 0 || __builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes) || bytes > (size_t{1} << 48)) {
            throw Failure("malformed tensor line: storage size out of range");
        }
    }
    return bytes;
}

// "tensor <in|out> <acl_dtype> <acl_format> <itemsize> <ndim> <dims..> <strides..> <offset>
//         <storage_ndim> <storage_dims..> <file>"
Param parse_tensor(std::istringstream& in) {
    Param t;
    std::string role;
    int dtype = 0, format = 0;
    size_t ndim = 0;
    in >> role >> dtype >> format >> t.itemsize >> ndim;
    if (!in || (role != "in" && role != "out") || ndim > 64) throw Failure("malformed tensor line");
    t.kind = Kind::Tensor;
    t.output = role == "out";
    t.dtype = static_cast<aclDataType>(dtype);
    t.format = static_cast<aclFormat>(format);
    t.dims.resize(ndim);
    t.strides.resize(ndim);
    for (auto& d : t.dims) in >> d;
    for (auto& s : t.strides) in >> s;
    size_t storage_ndim = 0;
    in >> t.offset >> storage_ndim;
    if (!in || storage_ndim > 64) throw Failure("malformed tensor line");
    t.storage_dims.resize(storage_ndim);
    for (auto& d : t.storage_dims) in >> d;
    if (!in || t.itemsize == 0 || t.itemsize > 16) throw Failure("malformed tensor line");
    t.storage_bytes = storage_size(t.storage_dims, t.itemsize);
    in >> std::ws;
    std::getline(in, t.file);
    if (t.file.empty()) throw Failure("malformed tensor line: no storage file");
    return t;
}

}  // namespace

bool read_request(std::istream& in, CaseRequest& req) {
    req = CaseRequest();
    std::string line;
    bool started = false;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string key;
        words >> key;
        std::string rest;
        words >> std::ws;
        if (key.empty()) continue;
        started = true;
        if (key == "end") return true;
        if (key == "tensor") {
            req.params.push_back(parse_tensor(words));
            continue;
        }
        if (key == "scalar") {  // "scalar <acl_dtype> <number>"
            Param p;
            int dtype = 0;
            words >> dtype >> p.value;
            if (!words) throw Failure("malformed scalar line: " + line);
            p.kind = Kind::Scalar;
            p.dtype = static_cast<aclDataType>(dtype);
            req.params.push_back(p);
            continue;
        }
        if (key == "int") {  // "int <int64>"
            Param p;
            p.kind = Kind::Int;
            p.integer = parse_int64(words, line);
            req.params.push_back(p);
            continue;
        }
        if (key == "double" || key == "float") {  // "<kind> <hex float>": a C double or float, exactly
            Param p;
            p.kind = key == "double" ? Kind::Double : Kind::Float;
            p.real = parse_real(words, line, p.kind == Kind::Float);
            req.params.push_back(p);
            continue;
        }
        if (key == "int_list" || key == "bool_list") {  // "<kind> <n> <values..>" (bools as 0/1)
            Param p;
            p.kind = key == "int_list" ? Kind::IntList : Kind::BoolList;
            int64_t n = parse_int64(words, line);
            if (n < 0 || n > 64) throw Failure("malformed list line (1-64 values): " + line);
            for (int64_t i = 0; i < n; ++i) {
                int64_t v = parse_int64(words, line);
                if (p.kind == Kind::BoolList && v != 0 && v != 1) throw Failure("malformed bool_list line: " + line);
                p.ints.push_back(v);
            }
            if (!(words >> std::ws).eof()) throw Failure("malformed list line (trailing text): " + line);
            req.params.push_back(p);
            continue;
        }
        std::getline(words, rest);
        if (key == "case") req.id = rest;
        else if (key == "op") req.op = rest;
        else if (key == "null") req.params.emplace_back();
        else if (key == "bool" && (rest == "0" || rest == "1")) {
            req.params.emplace_back();
            req.params.back().kind = Kind::Bool;
            req.params.back().value = rest;
        } else if (key == "string") {
            req.params.emplace_back();
            req.params.back().kind = Kind::String;
            req.params.back().value = rest;
        } else if (key == "status") req.status_path = rest;
        else if (key == "dump" && !req.params.empty() && req.params.back().output) req.params.back().dump = rest;
        else throw Failure("unexpected request line: " + line);
    }
    if (started) throw Failure("request for case " + req.id + " ended without 'end'");
    return false;
}

}  // namespace runner
