// Compiled with -frounding-math (CMakeLists.txt): the compiler must not fold or move float
// operations across fesetround.
#include "gpu/sim/compute/semantics.h"

#include <atomic>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>

namespace gpuvm::sim::compute {
namespace {

using isa::Rounding;
using isa::Type;

float F32(uint64_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits)); }
double F64(uint64_t bits) { return std::bit_cast<double>(bits); }
uint64_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

// Sets the FPU rounding mode for a scope (restores on exit).
class ScopedRounding {
 public:
  explicit ScopedRounding(uint8_t round) : saved_(fegetround()) {
    int mode = FE_TONEAREST;
    switch (static_cast<Rounding>(round)) {
      case Rounding::kRz:
      case Rounding::kRzi:
        mode = FE_TOWARDZERO;
        break;
      case Rounding::kRm:
      case Rounding::kRmi:
        mode = FE_DOWNWARD;
        break;
      case Rounding::kRp:
      case Rounding::kRpi:
        mode = FE_UPWARD;
        break;
      default:
        break;
    }
    if (mode != saved_) fesetround(mode);
  }
  ~ScopedRounding() {
    if (fegetround() != saved_) fesetround(saved_);
  }

 private:
  int saved_;
};

template <typename T>
T Saturate01(T v) {
  if (std::isnan(v)) return T(0);
  if (v < T(0)) return T(0);
  if (v > T(1)) return T(1);
  return v;
}

// Calls `f` with a value of `t`'s C++ integer type (U8 to U64; any other type as int64_t), so that
// one generic lambda serves every integer type.
template <typename F>
auto WithIntType(Type t, F&& f) {
  switch (t) {
    case Type::kU8:
      return f(uint8_t{});
    case Type::kS8:
      return f(int8_t{});
    case Type::kU16:
      return f(uint16_t{});
    case Type::kS16:
      return f(int16_t{});
    case Type::kU32:
      return f(uint32_t{});
    case Type::kS32:
      return f(int32_t{});
    case Type::kU64:
      return f(uint64_t{});
    default:
      return f(int64_t{});
  }
}

// Integer value of a source in canonical form, as a 128-bit signed number.
__int128 IntValue(Type t, uint64_t bits) {
  return WithIntType(t, [bits](auto tag) -> __int128 { return static_cast<decltype(tag)>(bits); });
}

void IntRange(Type t, __int128* lo, __int128* hi) {
  WithIntType(t, [lo, hi](auto tag) {
    *lo = std::numeric_limits<decltype(tag)>::min();
    *hi = std::numeric_limits<decltype(tag)>::max();
  });
}

// Truncates/extends an integer to `t`'s canonical register form: types narrower than 64 bits are
// held in 32 (signed ones sign-extended to 32, then zero-extended).
uint64_t IntBits(Type t, __int128 v) {
  return WithIntType(t, [v](auto tag) -> uint64_t {
    using T = decltype(tag);
    if constexpr (sizeof(T) < 8) {
      return static_cast<uint32_t>(static_cast<int32_t>(static_cast<T>(v)));
    } else {
      return static_cast<uint64_t>(static_cast<T>(v));
    }
  });
}

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int frac = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(frac), -24);
  } else if (exp == 31) {
    v = frac ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(frac | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

double FloatAsDouble(Type t, uint64_t bits) {
  if (t == Type::kF16) return HalfToDouble(static_cast<uint16_t>(bits));
  if (t == Type::kF32) return static_cast<double>(F32(bits));
  return F64(bits);
}

// Rounds `v` to IEEE binary16 with the given rounding (rn/rz/rm/rp; 0 = rn). NaN becomes the
// canonical quiet NaN 0x7e00.
uint64_t DoubleToHalf(double v, uint8_t round) {
  if (std::isnan(v)) return 0x7e00;
  const bool negative = std::signbit(v);
  const uint32_t sign = negative ? 0x8000u : 0;
  const double a = std::fabs(v);
  const Rounding r = round == 0 ? Rounding::kRn : static_cast<Rounding>(round);
  // Overflow goes to infinity or to the largest finite value, by direction.
  const bool up_in_magnitude =
      r == Rounding::kRn || (r == Rounding::kRp && !negative) || (r == Rounding::kRm && negative);
  const uint32_t overflow = up_in_magnitude ? 0x7c00u : 0x7bffu;
  if (std::isinf(a)) return sign | 0x7c00u;  // exactly representable in every rounding mode
  if (a == 0) return sign;
  int e2;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;      // a = (2m) * 2^e
  if (e > 15) return sign | overflow;
  const int quantum_exp = e < -14 ? -24 : e - 10;  // subnormals share the smallest quantum
  const double q = std::ldexp(a, -quantum_exp);    // exact: scaling by a power of two
  double n = std::floor(q);
  const double frac = q - n;  // exact
  bool bump = false;
  switch (r) {
    case Rounding::kRz:
      break;
    case Rounding::kRm:
      bump = negative && frac > 0;
      break;
    case Rounding::kRp:
      bump = !negative && frac > 0;
      break;
    default:
      bump = frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0);
      break;
  }
  if (bump) n += 1;
  const uint32_t mant = static_cast<uint32_t>(n);
  uint32_t bits;
  if (e < -14) {
    bits = mant;  // subnormal (mant == 1024 is the smallest normal: the encoding carries over)
  } else {
    bits = (static_cast<uint32_t>(e + 15) << 10) +
           (mant - 1024);  // mant == 2048 carries into the exponent
  }
  if (bits >= 0x7c00u) return sign | overflow;
  return sign | bits;
}

double RoundIntegral(double v, uint8_t round) {
  switch (static_cast<Rounding>(round)) {
    case Rounding::kRni:
      return std::nearbyint(v);  // default mode is to-nearest-even
    case Rounding::kRmi:
      return std::floor(v);
    case Rounding::kRpi:
      return std::ceil(v);
    default:
      return std::trunc(v);
  }
}

// Float (as double; f32 widens exactly) to integer with PTX's clamping: NaN -> 0, out of range ->
// bound.
uint64_t FloatToInt(Type dst, double v, uint8_t round) {
  if (std::isnan(v)) return 0;
  v = RoundIntegral(v, round);
  __int128 lo, hi;
  IntRange(dst, &lo, &hi);
  // Compare in double: bounds up to 2^64 are exact or round up, so check with care.
  if (v <= static_cast<double>(lo)) return IntBits(dst, lo);
  if (v >= static_cast<double>(hi)) {
    // hi as double may round up past hi (2^63 - 1 -> 2^63); any v >= that is out of range.
    return IntBits(dst, hi);
  }
  return IntBits(dst, static_cast<__int128>(v));
}

}  // namespace

uint64_t ConvertValue(uint32_t packed, uint64_t src_bits) {
  const Type dst = static_cast<Type>(packed & 0xf);
  const Type src = static_cast<Type>((packed >> 4) & 0xf);
  const uint8_t mod = static_cast<uint8_t>(packed >> 8);
  const uint8_t round = mod & isa::kModRoundMask;
  const bool sat = mod & isa::kModSat;
  const bool src_float = isa::IsFloatFormat(src), dst_float = isa::IsFloatFormat(dst);

  if (!src_float && !dst_float) {
    __int128 v = IntValue(src, src_bits);
    if (sat) {
      __int128 lo, hi;
      IntRange(dst, &lo, &hi);
      v = v < lo ? lo : (v > hi ? hi : v);
    }
    return IntBits(dst, v);
  }
  if (src_float && !dst_float) return FloatToInt(dst, FloatAsDouble(src, src_bits), round);
  const bool integral = round >= static_cast<uint8_t>(Rounding::kRni);
  if (dst == Type::kF16) {
    // Every source value is exact as a double (f16, f32, f64, and integers up to 2^53; larger
    // integers overflow f16 whatever their low bits), so one rounding, to f16, happens here.
    double v =
        src_float ? FloatAsDouble(src, src_bits) : static_cast<double>(IntValue(src, src_bits));
    if (integral) v = RoundIntegral(v, round);
    if (sat) v = Saturate01(v);
    return DoubleToHalf(v, integral ? 0 : round);
  }
  if (!src_float) {  // int -> f32/f64
    __int128 v = IntValue(src, src_bits);
    ScopedRounding scoped(round);
    if (dst == Type::kF32) {
      float f = src != Type::kU64 ? static_cast<float>(static_cast<int64_t>(v))
                                  : static_cast<float>(static_cast<uint64_t>(v));
      return Bits(sat ? Saturate01(f) : f);
    }
    double d = src != Type::kU64 ? static_cast<double>(static_cast<int64_t>(v))
                                 : static_cast<double>(static_cast<uint64_t>(v));
    return Bits(sat ? Saturate01(d) : d);
  }
  // float -> f32/f64
  if (src == Type::kF16 || src == Type::kF32) {
    // Widening (or same-size f32): exact, so only integral rounding and saturation apply.
    double d = FloatAsDouble(src, src_bits);
    if (integral) d = RoundIntegral(d, round);
    if (dst == Type::kF32) {
      float f = static_cast<float>(d);
      return Bits(sat ? Saturate01(f) : f);
    }
    return Bits(sat ? Saturate01(d) : d);
  }
  double d = F64(src_bits);
  if (integral) d = RoundIntegral(d, round);
  if (dst == Type::kF64) return Bits(sat ? Saturate01(d) : d);
  float f;
  {
    ScopedRounding scoped(integral ? 0 : round);
    volatile double vd = d;  // keep the narrowing inside the rounding scope
    f = static_cast<float>(vd);
  }
  return Bits(sat ? Saturate01(f) : f);
}

namespace {

// One operation of FloatSlowOp in F (float or double) under the caller's rounding mode. The
// volatiles keep the compiler from folding the operation or moving it out of that mode's scope.
template <typename F>
uint64_t RoundedFloatOp(isa::Opcode op, uint64_t a_bits, uint64_t b_bits, uint64_t c_bits,
                        bool sat) {
  auto value = [](uint64_t bits) -> F {
    if constexpr (std::is_same_v<F, float>) {
      return F32(bits);
    } else {
      return F64(bits);
    }
  };
  volatile F a = value(a_bits), b = value(b_bits), c = value(c_bits);
  F r = 0;
  switch (op) {
    case isa::Opcode::kAdd:
      r = a + b;
      break;
    case isa::Opcode::kSub:
      r = a - b;
      break;
    case isa::Opcode::kMul:
      r = a * b;
      break;
    case isa::Opcode::kFma:
      r = std::fma(static_cast<F>(a), static_cast<F>(b), static_cast<F>(c));
      break;
    case isa::Opcode::kDiv:
      r = a / b;
      break;
    case isa::Opcode::kSqrt:
      r = std::sqrt(static_cast<F>(a));
      break;
    case isa::Opcode::kRcp:
      r = F(1) / a;
      break;
    default:
      break;
  }
  volatile F result = r;
  return Bits(sat ? Saturate01(static_cast<F>(result)) : static_cast<F>(result));
}

}  // namespace

uint64_t FloatSlowOp(uint32_t packed, uint64_t a_bits, uint64_t b_bits, uint64_t c_bits) {
  const auto op = static_cast<isa::Opcode>(packed & 0xff);
  const auto type = static_cast<Type>((packed >> 8) & 0xf);
  const uint8_t mod = static_cast<uint8_t>(packed >> 16);
  const uint8_t round = mod & isa::kModRoundMask;
  const bool sat = mod & isa::kModSat;
  ScopedRounding scoped(round);
  if (type == Type::kF32) return RoundedFloatOp<float>(op, a_bits, b_bits, c_bits, sat);
  return RoundedFloatOp<double>(op, a_bits, b_bits, c_bits, sat);
}

namespace {

template <typename T>
uint64_t ToBits(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return Bits(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return Bits(v);
  } else {
    return static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
  }
}
template <typename T>
T FromBits(uint64_t bits) {
  if constexpr (std::is_same_v<T, float>) {
    return F32(bits);
  } else if constexpr (std::is_same_v<T, double>) {
    return F64(bits);
  } else {
    return static_cast<T>(bits);
  }
}

template <typename T>
uint64_t Rmw(uint8_t* p, isa::AtomOp op, uint64_t b_bits, uint64_t c_bits) {
  std::atomic_ref<T> ref(*reinterpret_cast<T*>(p));
  const T b = FromBits<T>(b_bits);
  const T c = FromBits<T>(c_bits);
  auto update = [&](auto next) {
    T old = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(old, next(old), std::memory_order_relaxed)) {
    }
    return ToBits(old);
  };
  switch (op) {
    case isa::AtomOp::kAdd:
      if constexpr (std::is_floating_point_v<T>) {
        return update([&](T old) { return old + b; });
      } else {
        return ToBits<T>(ref.fetch_add(b, std::memory_order_relaxed));
      }
    case isa::AtomOp::kMin:
      return update([&](T old) { return b < old ? b : old; });
    case isa::AtomOp::kMax:
      return update([&](T old) { return b > old ? b : old; });
    case isa::AtomOp::kInc:
      return update([&](T old) { return old >= b ? T(0) : T(old + 1); });
    case isa::AtomOp::kDec:
      return update([&](T old) { return (old == T(0) || old > b) ? b : T(old - 1); });
    case isa::AtomOp::kCas: {
      T expected = b;
      ref.compare_exchange_strong(expected, c, std::memory_order_relaxed);
      return ToBits(expected);  // the old value, whether or not it matched
    }
    case isa::AtomOp::kExch:
      return ToBits<T>(ref.exchange(b, std::memory_order_relaxed));
    case isa::AtomOp::kAnd:
      if constexpr (std::is_integral_v<T>)
        return ToBits<T>(ref.fetch_and(b, std::memory_order_relaxed));
      break;
    case isa::AtomOp::kOr:
      if constexpr (std::is_integral_v<T>)
        return ToBits<T>(ref.fetch_or(b, std::memory_order_relaxed));
      break;
    case isa::AtomOp::kXor:
      if constexpr (std::is_integral_v<T>)
        return ToBits<T>(ref.fetch_xor(b, std::memory_order_relaxed));
      break;
  }
  return ToBits(ref.load(std::memory_order_relaxed));
}

}  // namespace

uint64_t AtomicRmw(uint8_t* p, isa::AtomOp op, Type type, uint64_t b, uint64_t c) {
  switch (type) {
    case Type::kU32:
      return Rmw<uint32_t>(p, op, b, c);
    case Type::kS32:
      return Rmw<int32_t>(p, op, b, c);
    case Type::kU64:
      return Rmw<uint64_t>(p, op, b, c);
    case Type::kS64:
      return Rmw<int64_t>(p, op, b, c);
    case Type::kF32:
      return Rmw<float>(p, op, b, c);
    case Type::kF64:
      return Rmw<double>(p, op, b, c);
    default:
      return 0;  // the validator admits no other type
  }
}

}  // namespace gpuvm::sim::compute
