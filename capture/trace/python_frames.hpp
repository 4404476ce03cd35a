// The Python frames of the calling thread, read in place from CPython's own structures, the way
// py-spy and Austin read them from outside: a traced call made from Python code names the
// function and file:line of each Python frame, merged with the native frames.
//
// Why in place, without the Python C API: the thread that calls a BLAS or oneDNN function has
// usually released the GIL (PyTorch's bindings and NumPy's matmul do), so the API may not be
// called, and taking the GIL inside a BLAS call could deadlock the program. The thread's own frames
// cannot change while it is inside our call, and the code objects they point to stay alive as long
// as the frames do, so reading them is safe; nothing is written and nothing is allocated per call.
//
// The layouts are those of CPython 3.11 and 3.12 (x86-64, release builds, checked against their
// internal headers by a unit test) and, from 3.13 on, the offsets CPython itself publishes for
// debuggers in _PyRuntime.debug_offsets. Every code object is checked to be one (its type is
// PyCode_Type) before it is used; a frame that fails the check ends the walk.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sol::capture::trace::python {

// One Python frame as captured per call: what identifies it, no names yet.
struct Frame {
  uintptr_t code = 0;  // its PyCodeObject
  int32_t lasti = 0;   // index of the instruction in the code (code units), -1 before the first
  bool entry = false;  // the first frame of one C-level evaluation (_PyEval_EvalFrameDefault)
};

class Interpreter {
 public:
  enum class Status { not_found, found, unsupported };

  // Looks for CPython's exported symbols in the process: a few dlsym calls, so call it rarely (at
  // a process's first traced call and when a new stack appears: a program may load libpython
  // later). Once found or unsupported, the answer stays. One caller at a time.
  Status find() noexcept;
  Status status() const noexcept { return status_.load(std::memory_order_acquire); }
  bool found() const noexcept { return status() == Status::found; }
  // "3.11" and so on, once found or unsupported.
  const char* version() const noexcept { return version_; }

  // The calling thread's Python frames, innermost first, up to `max`: their number, 0 when the
  // thread runs no Python code at the moment, -1 when it has no Python thread state at all.
  int capture(Frame* out, int max) const noexcept;

  // "qualname (file:line)" of a captured frame. Only while the frame is live (the call that
  // captured it has not returned), since its code object may be freed afterwards.
  std::string describe(const Frame& f) const;

  // Whether a native return address is in the interpreter's own object (the python3.x executable
  // or libpython3.x.so): CPython's call machinery, which Python frames stand in for. Once found.
  bool in_interpreter(uintptr_t ip) const noexcept;

 private:
  // Where things are in the structures of one CPython version (byte offsets).
  struct Layout {
    size_t tstate_cframe = 0;       // PyThreadState.cframe (3.11, 3.12), or npos
    size_t cframe_current = 0;      // _PyCFrame.current_frame
    size_t tstate_frame = 0;        // PyThreadState.current_frame (3.13 on), or npos
    size_t frame_code = 0;          // _PyInterpreterFrame.f_code / f_executable
    size_t frame_previous = 0;      // .previous
    size_t frame_instr = 0;         // .prev_instr / instr_ptr
    size_t frame_owner = 0;         // .owner
    size_t frame_is_entry = 0;      // .is_entry (3.11), or npos
    int owner_cstack = -1;          // FRAME_OWNED_BY_CSTACK (3.12 on): an entry's shim frame
    size_t code_filename = 0, code_qualname = 0, code_adaptive = 0;
    size_t ascii_size = 0, compact_size = 0;  // sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject)
  };
  static constexpr size_t npos = ~size_t{0};

  bool layout_for(unsigned major, unsigned minor, const void* runtime) noexcept;
  std::string text(uintptr_t unicode) const;

  std::atomic<Status> status_{Status::not_found};
  char version_[16] = "";
  Layout l_;
  void* (*this_thread_state_)() = nullptr;  // PyGILState_GetThisThreadState
  int (*addr2line_)(void*, int) = nullptr;  // PyCode_Addr2Line
  int (*is_initialized_)() = nullptr;       // Py_IsInitialized
  uintptr_t code_type_ = 0, unicode_type_ = 0;
  const void* object_ = nullptr;  // the load address of the object that defines CPython's API
};

}  // namespace sol::capture::trace::python
