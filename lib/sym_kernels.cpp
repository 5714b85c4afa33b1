// etmlir_prim::sym_* kernels: Python's scalar arithmetic on sizes computed at
// run time (x.shape[0] * x.shape[1], n // 2, torch.sym_max(n, 3), n % 3, ...).
//
// et-to-out-variants turns each edge.sym_* op into a call whose arguments are
// Int, Double or Bool values (a size query's result, an earlier sym op's, or a
// constant) and whose last argument is the value slot to write, planned by the
// program from the op's result type (i64 -> Int, f64 -> Double, i1 -> Bool).
// The op table is python/etmlir/dialects/sym_ops.py.
//
// Semantics are Python's: bools count as ints, int op int stays an int except
// for `/` (true division), `//` and `%` floor towards negative infinity, and an
// operation with a float operand is computed in double. Where Python would
// raise (division by zero, a float with no int value) and where a 64-bit int
// overflows (Python's ints would not), the kernel fails with a message naming
// the op and its operands: no undefined behaviour, no silent wrap-around.
// Mixed int/float comparisons compare as doubles (exact for |ints| < 2**53).
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <limits>

#include "etmlir/runtime/kernel.h"

namespace etmlir {
namespace {

// A Python number: an int (bools included) or a float.
struct Number {
  bool is_int;
  int64_t i;
  double d;
  double as_double() const { return is_int ? static_cast<double>(i) : d; }
};

Number integer(int64_t i) { return {true, i, 0.0}; }
Number floating(double d) { return {false, 0, d}; }

Number read(const EValue& v) {
  if (v.tag == Tag::Double) return floating(v.to_double());
  if (v.tag == Tag::Bool) return integer(v.to_bool() ? 1 : 0);
  return integer(v.to_int());
}

// Writes `n` into the result slot: a Double slot takes any number, an Int slot an int.
Error write(KernelContext& ctx, EValue& out, Number n) {
  if (out.tag == Tag::Double) {
    out.payload.as_double = n.as_double();
    return Error::ok();
  }
  if (out.tag == Tag::Int && n.is_int) {
    out.payload.as_int = n.i;
    return Error::ok();
  }
  if (out.tag == Tag::Int) {
    return ctx.fail(ErrorCode::InvalidProgram, "the result is the float %g, but the program planned an int for it",
                    n.d);
  }
  return ctx.fail(ErrorCode::InvalidProgram, "the result slot's kind is %s; expected int or float",
                  tag_name(out.tag));
}

Error write_bool(KernelContext& ctx, EValue& out, bool b) {
  if (out.tag == Tag::Bool) {
    out.payload.as_bool = b;
    return Error::ok();
  }
  if (out.tag == Tag::Int) {
    out.payload.as_int = b ? 1 : 0;
    return Error::ok();
  }
  return ctx.fail(ErrorCode::InvalidProgram, "the result slot's kind is %s; expected bool", tag_name(out.tag));
}

Error overflow(KernelContext& ctx, const char* what, int64_t a, int64_t b) {
  return ctx.fail(ErrorCode::InvalidArgument, "%" PRId64 " %s %" PRId64 " overflows a 64-bit int", a, what, b);
}

enum class Arith { Add, Sub, Mul, TrueDiv, FloorDiv, Mod, Pow, Max, Min };

const char* symbol(Arith op) {
  switch (op) {
    case Arith::Add: return "+";
    case Arith::Sub: return "-";
    case Arith::Mul: return "*";
    case Arith::TrueDiv: return "/";
    case Arith::FloorDiv: return "//";
    case Arith::Mod: return "%";
    case Arith::Pow: return "**";
    case Arith::Max: return "max";
    case Arith::Min: return "min";
  }
  return "?";
}

// Python's float divmod (CPython's float_divmod): the floored quotient and the
// remainder with the divisor's sign. `b` is not zero.
void float_divmod(double a, double b, double* floordiv, double* mod) {
  double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0.0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, b);
  }
  double q;
  if (div != 0.0) {
    q = std::floor(div);
    if (div - q > 0.5) q += 1.0;
  } else {
    q = std::copysign(0.0, a / b);
  }
  *floordiv = q;
  *mod = m;
}

Error int_pow(KernelContext& ctx, int64_t base, int64_t exponent, Number* result) {
  int64_t value = 1;
  int64_t factor = base;
  for (int64_t e = exponent; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(value, factor, &value)) return overflow(ctx, "**", base, exponent);
    if (e > 1 && __builtin_mul_overflow(factor, factor, &factor)) return overflow(ctx, "**", base, exponent);
  }
  *result = integer(value);
  return Error::ok();
}

Error int_arith(KernelContext& ctx, Arith op, int64_t a, int64_t b, Number* result) {
  int64_t r = 0;
  switch (op) {
    case Arith::Add:
      if (__builtin_add_overflow(a, b, &r)) return overflow(ctx, "+", a, b);
      break;
    case Arith::Sub:
      if (__builtin_sub_overflow(a, b, &r)) return overflow(ctx, "-", a, b);
      break;
    case Arith::Mul:
      if (__builtin_mul_overflow(a, b, &r)) return overflow(ctx, "*", a, b);
      break;
    case Arith::TrueDiv:
      if (b == 0) return ctx.fail(ErrorCode::InvalidArgument, "division by zero (%" PRId64 " / 0)", a);
      *result = floating(static_cast<double>(a) / static_cast<double>(b));
      return Error::ok();
    case Arith::FloorDiv:
    case Arith::Mod: {
      if (b == 0) {
        return ctx.fail(ErrorCode::InvalidArgument, "%s by zero (%" PRId64 " %s 0)",
                        op == Arith::Mod ? "modulo" : "division", a, symbol(op));
      }
      if (b == -1) {  // INT64_MIN / -1 is undefined in C++; INT64_MIN % -1 is 0
        if (op == Arith::Mod) break;
        if (__builtin_sub_overflow(int64_t{0}, a, &r)) return overflow(ctx, "//", a, b);
        break;
      }
      int64_t q = a / b;
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        q -= 1;
        m += b;
      }
      r = op == Arith::Mod ? m : q;
      break;
    }
    case Arith::Pow:
      if (b < 0) {  // Python: an int to a negative power is a float
        if (a == 0) {
          return ctx.fail(ErrorCode::InvalidArgument, "0 cannot be raised to the negative power %" PRId64, b);
        }
        *result = floating(std::pow(static_cast<double>(a), static_cast<double>(b)));
        return Error::ok();
      }
      return int_pow(ctx, a, b, result);
    case Arith::Max: r = b > a ? b : a; break;
    case Arith::Min: r = b < a ? b : a; break;
  }
  *result = integer(r);
  return Error::ok();
}

Error float_arith(KernelContext& ctx, Arith op, Number x, Number y, Number* result) {
  const double a = x.as_double();
  const double b = y.as_double();
  double r = 0.0;
  double unused = 0.0;
  switch (op) {
    case Arith::Add: r = a + b; break;
    case Arith::Sub: r = a - b; break;
    case Arith::Mul: r = a * b; break;
    case Arith::TrueDiv:
    case Arith::FloorDiv:
    case Arith::Mod:
      if (b == 0.0) {
        return ctx.fail(ErrorCode::InvalidArgument, "float %s by zero (%g %s %g)",
                        op == Arith::Mod ? "modulo" : "division", a, symbol(op), b);
      }
      if (op == Arith::TrueDiv) r = a / b;
      else if (op == Arith::FloorDiv) float_divmod(a, b, &r, &unused);
      else float_divmod(a, b, &unused, &r);
      break;
    case Arith::Pow:
      if (a == 0.0 && b < 0.0) {
        return ctx.fail(ErrorCode::InvalidArgument, "0.0 cannot be raised to the negative power %g", b);
      }
      if (a < 0.0 && std::isfinite(b) && b != std::floor(b)) {
        return ctx.fail(ErrorCode::InvalidArgument, "%g ** %g is a complex number", a, b);
      }
      r = std::pow(a, b);
      break;
    case Arith::Max:  // Python's max(a, b) / min(a, b): the first unless the second is larger / smaller
      *result = b > a ? y : x;
      return Error::ok();
    case Arith::Min:
      *result = b < a ? y : x;
      return Error::ok();
  }
  *result = floating(r);
  return Error::ok();
}

// etmlir_prim::sym_<op>(Scalar a, Scalar b) -> Scalar   (args: a, b, result)
template <Arith kOp>
Error binary(KernelContext& ctx, EValue** args) {
  const Number a = read(*args[0]);
  const Number b = read(*args[1]);
  Number r{};
  if (a.is_int && b.is_int) {
    ET_CHECK_OK(int_arith(ctx, kOp, a.i, b.i, &r));
  } else {
    ET_CHECK_OK(float_arith(ctx, kOp, a, b, &r));
  }
  return write(ctx, *args[2], r);
}

enum class Compare { Eq, Ne, Lt, Le, Gt, Ge };

template <typename T>
bool compare(Compare op, T a, T b) {
  switch (op) {
    case Compare::Eq: return a == b;
    case Compare::Ne: return a != b;
    case Compare::Lt: return a < b;
    case Compare::Le: return a <= b;
    case Compare::Gt: return a > b;
    case Compare::Ge: return a >= b;
  }
  return false;
}

// etmlir_prim::sym_<cmp>(Scalar a, Scalar b) -> bool
template <Compare kOp>
Error comparison(KernelContext& ctx, EValue** args) {
  const Number a = read(*args[0]);
  const Number b = read(*args[1]);
  const bool r = a.is_int && b.is_int ? compare(kOp, a.i, b.i) : compare(kOp, a.as_double(), b.as_double());
  return write_bool(ctx, *args[2], r);
}

// etmlir_prim::sym_neg(Scalar a) -> Scalar
Error sym_neg(KernelContext& ctx, EValue** args) {
  const Number a = read(*args[0]);
  if (!a.is_int) return write(ctx, *args[1], floating(-a.d));
  if (a.i == std::numeric_limits<int64_t>::min()) {
    return ctx.fail(ErrorCode::InvalidArgument, "-(%" PRId64 ") overflows a 64-bit int", a.i);
  }
  return write(ctx, *args[1], integer(-a.i));
}

// A float's int value after `round` (trunc, floor or ceil), as Python's int() / math.floor / math.ceil.
Error to_int(KernelContext& ctx, double (*round)(double), const Number& a, Number* result) {
  if (a.is_int) {
    *result = a;
    return Error::ok();
  }
  if (std::isnan(a.d)) return ctx.fail(ErrorCode::InvalidArgument, "cannot convert float NaN to an int");
  if (std::isinf(a.d)) return ctx.fail(ErrorCode::InvalidArgument, "cannot convert float %g to an int", a.d);
  const double r = round(a.d);
  // [-2**63, 2**63): every double in it converts exactly.
  if (r < -9223372036854775808.0 || r >= 9223372036854775808.0) {
    return ctx.fail(ErrorCode::InvalidArgument, "float %g does not fit a 64-bit int", a.d);
  }
  *result = integer(static_cast<int64_t>(r));
  return Error::ok();
}

double round_trunc(double x) { return std::trunc(x); }
double round_floor(double x) { return std::floor(x); }
double round_ceil(double x) { return std::ceil(x); }

// etmlir_prim::sym_int / sym_floor / sym_ceil(Scalar a) -> int
template <double (*kRound)(double)>
Error integral(KernelContext& ctx, EValue** args) {
  Number r{};
  ET_CHECK_OK(to_int(ctx, kRound, read(*args[0]), &r));
  return write(ctx, *args[1], r);
}

// etmlir_prim::sym_float(Scalar a) -> float
Error sym_float(KernelContext& ctx, EValue** args) {
  return write(ctx, *args[1], floating(read(*args[0]).as_double()));
}

// etmlir_prim::sym_not(Scalar a) -> bool: Python's `not a`.
Error sym_not(KernelContext& ctx, EValue** args) {
  const Number a = read(*args[0]);
  return write_bool(ctx, *args[1], a.is_int ? a.i == 0 : a.d == 0.0);
}

}  // namespace

Error register_sym_kernels(KernelRegistry& registry) {
  // Scalar operands are Int, Double or Bool values ('s'); results are the slots the program planned.
  ET_CHECK_OK(registry.add("etmlir_prim::sym_add", "ss|s", binary<Arith::Add>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_sub", "ss|s", binary<Arith::Sub>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_mul", "ss|s", binary<Arith::Mul>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_truediv", "ss|f", binary<Arith::TrueDiv>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_floordiv", "ss|s", binary<Arith::FloorDiv>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_mod", "ss|s", binary<Arith::Mod>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_pow", "ss|s", binary<Arith::Pow>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_max", "ss|s", binary<Arith::Max>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_min", "ss|s", binary<Arith::Min>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_neg", "s|s", sym_neg));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_eq", "ss|b", comparison<Compare::Eq>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_ne", "ss|b", comparison<Compare::Ne>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_lt", "ss|b", comparison<Compare::Lt>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_le", "ss|b", comparison<Compare::Le>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_gt", "ss|b", comparison<Compare::Gt>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_ge", "ss|b", comparison<Compare::Ge>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_int", "s|i", integral<round_trunc>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_float", "s|f", sym_float));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_floor", "s|i", integral<round_floor>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_ceil", "s|i", integral<round_ceil>));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_not", "s|b", sym_not));
  return Error::ok();
}

}  // namespace etmlir
