// Status and Result<T>: the one error type of the project (CONTRIBUTING.md, "Code").
//
// A Status is free when OK (a null pointer) and carries a code plus a short sentence otherwise.
// Result<T> holds either a T or a non-OK Status. Both are [[nodiscard]]: an ignored error is a
// compile error. Fallible construction goes through `static Result<std::unique_ptr<T>>
// Create(...)`.
//
// Threading: values, no shared state; safe to move between threads.
#ifndef GPUVM_BASE_STATUS_H_
#define GPUVM_BASE_STATUS_H_

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gpuvm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed
  kNotFound,           // a named thing does not exist
  kAlreadyExists,      // a thing that must be unique is taken
  kOutOfRange,         // an address, index or size past a bound
  kPermissionDenied,   // the caller may not do this (e.g. a VM touching what it does not own)
  kFailedPrecondition, // the system is not in the state the call needs
  kResourceExhausted,  // no free channel, no memory, queue full
  kUnavailable,        // a peer or device is not there (yet); retrying may help
  kDeadlineExceeded,   // a wait ran out of time
  kAborted,            // the work was cancelled (e.g. a channel killed by a fault)
  kDataLoss,           // a peer sent something torn or inconsistent
  kUnimplemented,      // the request is valid but this build does not support it
  kInternal,           // a broken invariant of our own
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {StatusCode::kAlreadyExists, std::move(msg)}; }
  static Status OutOfRange(std::string msg) { return {StatusCode::kOutOfRange, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) {
    return {StatusCode::kPermissionDenied, std::move(msg)};
  }
  static Status FailedPrecondition(std::string msg) {
    return {StatusCode::kFailedPrecondition, std::move(msg)};
  }
  static Status ResourceExhausted(std::string msg) {
    return {StatusCode::kResourceExhausted, std::move(msg)};
  }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) {
    return {StatusCode::kDeadlineExceeded, std::move(msg)};
  }
  static Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
  static Status DataLoss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
  static Status Unimplemented(std::string msg) { return {StatusCode::kUnimplemented, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  // From errno after a failed system call: "<what>: <strerror(err)>".
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : state_->code; }
  // Empty when OK.
  const std::string& message() const;
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // A copy with "<context>: " put in front of the message (OK stays OK).
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

// Either a T or an error. Constructing from an OK Status is a programming error (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK Status");
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gpuvm

#define GPUVM_CONCAT_INNER_(a, b) a##b
#define GPUVM_CONCAT_(a, b) GPUVM_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define GPUVM_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::gpuvm::Status gpuvm_status_ = (expr);         \
    if (!gpuvm_status_.ok()) return gpuvm_status_;  \
  } while (0)

// `GPUVM_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its error.
#define GPUVM_ASSIGN_OR_RETURN(lhs, expr) \
  GPUVM_ASSIGN_OR_RETURN_IMPL_(GPUVM_CONCAT_(gpuvm_result_, __LINE__), lhs, expr)
#define GPUVM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // GPUVM_BASE_STATUS_H_
