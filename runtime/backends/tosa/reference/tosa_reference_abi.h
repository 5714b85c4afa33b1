// The C interface between the runtime's "tosa" backend (tosa_backend.cpp, in the
// runtime) and libetmlir_tosa_reference.so (reference_runner.cpp), which links the
// TOSA reference model from tosa-tools. The backend loads the library with dlopen at
// run time: the runtime builds, links and runs without tosa-tools (the backend then
// reports is_available() == false), and the reference model's own FlatBuffers (a
// newer release than the runtime's) stays inside the library, whose symbols are
// hidden but for these.
//
// Every function catches what the reference model throws; none aborts on a bad
// graph that passed etmlir_tosa_graph_create. Messages are NUL-terminated and
// truncated to the caller's buffer. Graphs run one at a time (the reference model
// keeps global state): the library serialises create/run/destroy.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ETMLIR_TOSA_REFERENCE_ABI_VERSION 1u
#define ETMLIR_TOSA_MAX_RANK 8

typedef struct etmlir_tosa_graph etmlir_tosa_graph;

// A graph input or output: the runtime's ScalarType code (6: float32, 11: bool, ...), the shape.
typedef struct {
  int32_t scalar_type;
  uint32_t rank;
  int64_t sizes[ETMLIR_TOSA_MAX_RANK];
  uint64_t nbytes;
} etmlir_tosa_tensor_info;

// ETMLIR_TOSA_REFERENCE_ABI_VERSION of the library.
uint32_t etmlir_tosa_reference_abi_version(void);
// "tosa-tools 2026.8.0 reference model, serialization library 1.1.0d" (static storage).
const char* etmlir_tosa_reference_version(void);

// Checks `size` bytes as a TOSA FlatBuffer (the FlatBuffers verifier, the spec version, one
// region `region` with one block, every tensor's type and shape, constant data sizes, the
// tensor types `profile` allows: "pro_fp" or "pro_int") and builds the reference model's graph
// (which validates every operator). The bytes are copied. NULL and a message on failure.
etmlir_tosa_graph* etmlir_tosa_graph_create(const uint8_t* data, size_t size, const char* region,
                                            const char* profile, char* message, size_t message_size);
uint32_t etmlir_tosa_graph_num_inputs(const etmlir_tosa_graph* graph);
uint32_t etmlir_tosa_graph_num_outputs(const etmlir_tosa_graph* graph);
// 0 on success; -1 when `index` is out of range.
int etmlir_tosa_graph_input_info(const etmlir_tosa_graph* graph, uint32_t index, etmlir_tosa_tensor_info* out);
int etmlir_tosa_graph_output_info(const etmlir_tosa_graph* graph, uint32_t index, etmlir_tosa_tensor_info* out);
// Runs the graph: inputs[i] holds input i's nbytes, outputs[i] receives output i's. 0 on
// success, else -1 and a message.
int etmlir_tosa_graph_run(etmlir_tosa_graph* graph, const void* const* inputs, void* const* outputs, char* message,
                          size_t message_size);
void etmlir_tosa_graph_destroy(etmlir_tosa_graph* graph);

#ifdef __cplusplus
}
#endif
