// The table of differential cases known to fail. Keep it short and current: an entry whose
// case passes fails the run, so fix the bug and delete the line in the same change.
#include "diff/expected_failures.h"

#include <array>

namespace kiln::diff {

namespace {

// {"case name exactly as the failure message spells it", "why it fails (issue or cause)"},
constexpr std::array<ExpectedFailure, 18> kExpectedFailures{{
    {"chains [f32 7x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f32 1023 and 0-d]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f32 7x1 and 1x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f32 transposed and expanded]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f64 7x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f64 1023 and 0-d]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f64 transposed and expanded]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [bf16 7x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [bf16 7x1 and 1x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [bf16 transposed and expanded]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [i32 7x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [i32 1023 and 0-d]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [i32 7x1 and 1x33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [i32 transposed and expanded]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
    {"chains [f16 7x33]",
     "-0.0 where eager gives +0.0 in output 8 (maximum(x, y) - minimum(x, 0) * 2), only when "
     "compiled with the other 16 chains in one graph; not reproduced alone: under investigation"},
    {"chains [f16 1023 and 0-d]",
     "-0.0 where eager gives +0.0 in output 8 (maximum(x, y) - minimum(x, 0) * 2), only when "
     "compiled with the other 16 chains in one graph; not reproduced alone: under investigation"},
    {"chains [f16 transposed and expanded]",
     "-0.0 where eager gives +0.0 in output 8 (maximum(x, y) - minimum(x, 0) * 2), only when "
     "compiled with the other 16 chains in one graph; not reproduced alone: under investigation"},
    {"erf(x) + sin(y) * cos(x) [f32 7x33 and 33]",
     "sin/cos of |x| beyond the vector math's accurate range (f32 4e6, f64 1e15; the specials hold "
     "1e10, 1e20, large i32): no Payne-Hanek reduction yet"},
}};

} // namespace

std::span<const ExpectedFailure> expected_failures() { return kExpectedFailures; }

} // namespace kiln::diff
