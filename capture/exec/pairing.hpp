// DNN primitives that hand state from one call to the next: a forward-training pooling or
// normalization leaves a workspace (and mean and variance) that its backward pass reads. A
// workspace's format is private to whatever wrote it (oneDNN's kernels, or a SOL backend's), so
// the backward pass must run where the forward pass ran. The executor records who wrote each
// state buffer, keyed by its address, and routes readers there.
#pragma once

#include "hal/backend.hpp"
#include "ir/dnn.hpp"

namespace sol::capture::pairing {

// The buffer that carries a node's state (its workspace, else its mean), or nullptr when the
// node neither leaves nor takes state.
const void* state_key(const dnn::Call& call) noexcept;
// Whether the node writes that state (forward training) rather than reading it.
bool writes_state(const dnn::Call& call) noexcept;

// After a state-writing node ran on `backend` (nullptr: natively): later readers go there.
void record(const void* key, hal::Backend* backend) noexcept;
// Where the state at `key` was written: true with `backend` (nullptr: natively); false when no
// state-writing node SOL saw wrote it, which also means natively.
bool owner(const void* key, hal::Backend*& backend) noexcept;

}  // namespace sol::capture::pairing
