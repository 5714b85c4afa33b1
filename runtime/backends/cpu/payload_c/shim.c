/* PAYLOAD.md's exported symbols and the payload's allocator.
 *
 * The allocator is first-fit over an address-ordered free list inside the arena the runtime
 * gives (etmlir_cpu_set_arena). Every block is a 64-byte header followed by a payload whose
 * size is a multiple of 64, so every pointer handed out is 64-byte aligned. Blocks tile
 * [base, base + top); freeing a block merges it with free neighbours, and a free block that
 * ends at `top` is given back to the untouched region above it. The same sequence of calls
 * therefore gives the same offsets, and `top`'s high-water mark is what the arena must hold.
 * Requests that do not fit (or arrive before an arena is set) go to the C heap and are counted;
 * free() tells the two apart by address range.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etmlir_cpu_payload.h"

enum { kAlign = 64, kHeader = 64 };
enum { kMagicBlock = 0x4b4c4245u, kMagicForward = 0x44574645u };

typedef struct block {
  uint64_t size;             /* payload bytes, a multiple of 64 */
  struct block* prev_phys;   /* block just below, NULL for the first */
  struct block* next_free;   /* free list, address order (only while free) */
  struct block* prev_free;
  struct block* forward_to;  /* kMagicForward headers: the real block */
  uint32_t magic;
  uint32_t is_free;
  uint64_t pad[2];
} block;
_Static_assert(sizeof(block) == kHeader, "block header must be 64 bytes");

static uint8_t* g_base;          /* 64-aligned start of the arena, NULL when none */
static uint64_t g_bytes;         /* usable bytes from g_base */
static void* g_raw_base;         /* what set_arena was given */
static uint64_t g_raw_bytes;
static uint64_t g_top;           /* bytes of [g_base, ...) covered by blocks */
static uint64_t g_peak;          /* max g_top + alignment slack ever needed */
static uint64_t g_fallbacks;
static block* g_last;            /* highest block, NULL when the arena is empty */
static block* g_free_head;
static volatile char g_lock;

static etmlir_parallel_fn g_parallel_fn;
static void* g_parallel_ctx;
static int g_num_threads = 1;

static void lock(void) {
  while (__atomic_test_and_set(&g_lock, __ATOMIC_ACQUIRE)) {
  }
}

static void unlock(void) { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }

static uint8_t* payload_of(block* b) { return (uint8_t*)b + kHeader; }

static block* next_phys(block* b) {
  uint8_t* end = payload_of(b) + b->size;
  return end < g_base + g_top ? (block*)end : NULL;
}

static void free_list_remove(block* b) {
  if (b->prev_free) {
    b->prev_free->next_free = b->next_free;
  } else {
    g_free_head = b->next_free;
  }
  if (b->next_free) b->next_free->prev_free = b->prev_free;
  b->next_free = b->prev_free = NULL;
  b->is_free = 0;
}

static void free_list_insert(block* b) {
  block* prev = NULL;
  block* cur = g_free_head;
  while (cur && cur < b) {
    prev = cur;
    cur = cur->next_free;
  }
  b->prev_free = prev;
  b->next_free = cur;
  if (prev) {
    prev->next_free = b;
  } else {
    g_free_head = b;
  }
  if (cur) cur->prev_free = b;
  b->is_free = 1;
}

/* Takes `need` payload bytes (a multiple of 64) from the arena, or NULL. */
static block* arena_take(uint64_t need) {
  for (block* b = g_free_head; b; b = b->next_free) {
    if (b->size < need) continue;
    free_list_remove(b);
    if (b->size - need >= kHeader + kAlign) {
      block* rest = (block*)(payload_of(b) + need);
      rest->size = b->size - need - kHeader;
      rest->prev_phys = b;
      rest->magic = kMagicBlock;
      rest->forward_to = NULL;
      block* after = next_phys(b);
      b->size = need;
      if (after) {
        after->prev_phys = rest;
      } else {
        g_last = rest;
      }
      free_list_insert(rest);
    }
    return b;
  }
  if (need > g_bytes || g_top + kHeader > g_bytes - need) return NULL;
  block* b = (block*)(g_base + g_top);
  b->size = need;
  b->prev_phys = g_last;
  b->magic = kMagicBlock;
  b->is_free = 0;
  b->forward_to = NULL;
  b->next_free = b->prev_free = NULL;
  g_last = b;
  g_top += kHeader + need;
  if (g_top + kAlign > g_peak) g_peak = g_top + kAlign;
  return b;
}

static void arena_give_back(block* b) {
  block* after = next_phys(b);
  if (after && after->is_free) {
    free_list_remove(after);
    b->size += kHeader + after->size;
    block* next = next_phys(b);
    if (next) {
      next->prev_phys = b;
    } else {
      g_last = b;
    }
  }
  block* before = b->prev_phys;
  if (before && before->is_free) {
    free_list_remove(before);
    before->size += kHeader + b->size;
    block* next = next_phys(before);
    if (next) {
      next->prev_phys = before;
    } else {
      g_last = before;
    }
    b = before;
  }
  if (b == g_last) {
    /* The highest block returns to the untouched region. */
    g_top = (uint64_t)((uint8_t*)b - g_base);
    g_last = b->prev_phys;
    b->magic = 0;
    return;
  }
  free_list_insert(b);
}

/* The edge op (debug handle) of the region the running entry point began last, 0 before the first (only
 * the generated code, on the entry point's thread, begins regions); and whether this thread runs an entry
 * point under etmlir_cpu_run: a failed allocation there fails the run. */
static int32_t g_region_handle;
static __thread int t_in_run;
static void fail_allocation(size_t size);

static void* allocate(size_t alignment, size_t size) {
  if (alignment < kAlign) alignment = kAlign;
  if ((alignment & (alignment - 1)) != 0) return NULL;
  uint64_t need = ((uint64_t)(size ? size : 1) + kAlign - 1) & ~(uint64_t)(kAlign - 1);
  if (alignment > kAlign) need += alignment - kAlign;
  lock();
  block* b = g_base && need < ((uint64_t)1 << 62) ? arena_take(need) : NULL;
  if (b) {
    uint8_t* p = payload_of(b);
    uint8_t* q = (uint8_t*)(((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1));
    if (q != p) {
      /* Over-aligned request: a forwarding header just below q leads free() to the block. */
      block* fwd = (block*)(q - kHeader);
      fwd->magic = kMagicForward;
      fwd->forward_to = b;
    }
    unlock();
    return q;
  }
  g_fallbacks++;
  unlock();
  void* p = NULL;
  if (posix_memalign(&p, alignment, size ? size : 1) != 0) {
    fail_allocation(size); /* returns only off the entry point's thread */
    return NULL;
  }
  return p;
}

static void deallocate(void* ptr) {
  if (!ptr) return;
  uint8_t* p = (uint8_t*)ptr;
  lock();
  if (!g_base || p < g_base || p >= g_base + g_bytes) {
    unlock();
    free(ptr);
    return;
  }
  block* b = (block*)(p - kHeader);
  if (b->magic == kMagicForward) b = b->forward_to;
  if (b->magic == kMagicBlock && !b->is_free) arena_give_back(b);
  unlock();
}

ETMLIR_CPU_EXPORT int etmlir_cpu_payload_abi(void) { return 1; }

ETMLIR_CPU_EXPORT void etmlir_cpu_set_arena(void* base, uint64_t bytes) {
  lock();
  if (base == g_raw_base && bytes == g_raw_bytes) {
    unlock();
    return;
  }
  g_raw_base = base;
  g_raw_bytes = bytes;
  g_base = NULL;
  g_bytes = 0;
  g_top = 0;
  g_last = NULL;
  g_free_head = NULL;
  if (base) {
    uintptr_t aligned = ((uintptr_t)base + kAlign - 1) & ~(uintptr_t)(kAlign - 1);
    uint64_t skip = aligned - (uintptr_t)base;
    if (bytes > skip + kHeader + kAlign) {
      g_base = (uint8_t*)aligned;
      g_bytes = (bytes - skip) & ~(uint64_t)(kAlign - 1);
    }
  }
  unlock();
}

ETMLIR_CPU_EXPORT uint64_t etmlir_cpu_heap_fallbacks(void) { return g_fallbacks; }

ETMLIR_CPU_EXPORT uint64_t etmlir_cpu_arena_peak(void) { return g_peak; }

ETMLIR_CPU_EXPORT void etmlir_cpu_set_parallel(etmlir_parallel_fn fn, void* ctx, int num_threads) {
  g_parallel_fn = fn;
  g_parallel_ctx = ctx;
  g_num_threads = fn && num_threads > 1 ? num_threads : 1;
}

ETMLIR_CPU_EXPORT void* _mlir_memref_to_llvm_alloc(size_t size) { return allocate(kAlign, size); }

ETMLIR_CPU_EXPORT void* _mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return allocate(alignment, size);
}

ETMLIR_CPU_EXPORT void _mlir_memref_to_llvm_free(void* ptr) { deallocate(ptr); }

ETMLIR_CPU_INTERNAL void* etmlir_cpu_scratch_alloc(size_t bytes) { return allocate(kAlign, bytes); }

ETMLIR_CPU_INTERNAL void etmlir_cpu_scratch_free(void* ptr) { deallocate(ptr); }

ETMLIR_CPU_INTERNAL int etmlir_cpu_num_threads(void) { return g_num_threads; }

/* ---- Tasks claimed at run time ---------------------------------------------------------------- */

typedef struct {
  int64_t next; /* the share's next unclaimed task (claimed by fetch-and-add) */
  int64_t end;
} __attribute__((aligned(64))) task_share; /* a cache line each: the owner claims without sharing one */

typedef struct {
  task_share shares[ETMLIR_CPU_MAX_SLOTS];
  int slots;
  etmlir_task_body body;
  void* arg;
} task_job;

ETMLIR_CPU_INTERNAL int etmlir_cpu_task_slots(int64_t tasks) {
  int64_t slots = tasks < g_num_threads ? tasks : g_num_threads;
  return (int)(slots < 1 ? 1 : slots > ETMLIR_CPU_MAX_SLOTS ? ETMLIR_CPU_MAX_SLOTS : slots);
}

/* Participant `slot` (the pool gives each its own index; a pool that runs the loop serially gives one
 * thread [0, slots), which then claims every task as slot `begin`). */
static void task_job_body(void* arg, int64_t begin, int64_t end) {
  task_job* job = (task_job*)arg;
  int slot = (int)begin;
  for (int64_t s = begin; s < end; s++)
    for (int k = 0; k < job->slots; k++) {
      task_share* share = &job->shares[(s + k) % job->slots];
      for (;;) {
        int64_t t = __atomic_fetch_add(&share->next, 1, __ATOMIC_RELAXED);
        if (t >= share->end) break;
        job->body(job->arg, t, slot);
      }
    }
}

ETMLIR_CPU_INTERNAL void etmlir_cpu_parallel_tasks(int64_t tasks, etmlir_task_body body, void* arg) {
  if (tasks <= 0) return;
  int slots = etmlir_cpu_task_slots(tasks);
  if (slots == 1 || !g_parallel_fn) {
    for (int64_t t = 0; t < tasks; t++) body(arg, t, 0);
    return;
  }
  task_job job;
  job.slots = slots;
  job.body = body;
  job.arg = arg;
  for (int s = 0; s < slots; s++) {
    job.shares[s].next = tasks * s / slots;
    job.shares[s].end = tasks * (s + 1) / slots;
  }
  g_parallel_fn(g_parallel_ctx, slots, task_job_body, &job);
}

/* ---- Timed regions (et-cpu-trace-regions) and failures (et-cpu-report-failures) ---------------- */

static etmlir_region_fn g_region_fn;
static void* g_region_ctx;

ETMLIR_CPU_EXPORT void etmlir_cpu_set_tracer(etmlir_region_fn fn, void* ctx) {
  g_region_ctx = ctx;
  g_region_fn = fn;
}

/* Called by the generated code around each region: one pointer test when no tracer is set. */
ETMLIR_CPU_EXPORT void etmlir_cpu_region_begin(int32_t region, int32_t debug_handle) {
  g_region_handle = debug_handle;
  if (g_region_fn) g_region_fn(g_region_ctx, region, debug_handle, 1);
}

ETMLIR_CPU_EXPORT void etmlir_cpu_region_end(int32_t region) {
  if (g_region_fn) g_region_fn(g_region_ctx, region, 0, 0);
}

static jmp_buf* g_fail_jump; /* set while etmlir_cpu_run runs an entry point */
static int32_t g_failed_handle;
static char g_failure[256];

/* A run-time check of the generated code failed (`message`: a NUL-terminated string in the
 * payload's read-only data). Unwinds to etmlir_cpu_run; called outside of it (an entry point
 * called directly), it can only report and abort, as MLIR's own assert lowering would. */
ETMLIR_CPU_EXPORT void etmlir_cpu_fail(int32_t debug_handle, int64_t message) {
  const char* text = message ? (const char*)(intptr_t)message : "run-time check failed";
  g_failed_handle = debug_handle;
  snprintf(g_failure, sizeof(g_failure), "%s", text);
  if (g_fail_jump) longjmp(*g_fail_jump, 1);
  fprintf(stderr, "etmlir cpu payload: %s (edge op debug handle %d)\n", g_failure, (int)debug_handle);
  abort();
}

/* Neither the arena nor the heap had `size` bytes. On the thread running an entry point under
 * etmlir_cpu_run, the run fails with that (the generated code would write through the null pointer:
 * EfficientNet's pooler once asked for 8 GB and crashed the process); elsewhere (a worker thread, or
 * an entry point called directly) it returns and the caller gets NULL, as from malloc. */
static void fail_allocation(size_t size) {
  static char message[96];
  if (!t_in_run || !g_fail_jump) return;
  snprintf(message, sizeof(message), "out of memory: could not allocate %llu bytes",
           (unsigned long long)size);
  etmlir_cpu_fail(g_region_handle, (int64_t)(intptr_t)message);
}

ETMLIR_CPU_EXPORT int etmlir_cpu_run(void (*entry)(void**), void** args) {
  jmp_buf jump;
  g_failed_handle = 0;
  g_failure[0] = '\0';
  g_region_handle = 0;
  if (setjmp(jump) != 0) {
    g_fail_jump = NULL;
    t_in_run = 0;
    return 1;
  }
  g_fail_jump = &jump;
  t_in_run = 1;
  entry(args);
  t_in_run = 0;
  g_fail_jump = NULL;
  return 0;
}

ETMLIR_CPU_EXPORT int32_t etmlir_cpu_failed_handle(void) { return g_failed_handle; }

ETMLIR_CPU_EXPORT const char* etmlir_cpu_failure(void) { return g_failure; }

ETMLIR_CPU_EXPORT void etmlir_cpu_reset_arena(void) {
  void* base = g_raw_base;
  uint64_t bytes = g_raw_bytes;
  g_raw_base = NULL; /* set_arena skips a call with the same arena */
  g_raw_bytes = 0;
  etmlir_cpu_set_arena(base, bytes);
}
