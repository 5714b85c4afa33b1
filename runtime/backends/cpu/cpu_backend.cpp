// The "cpu" backend: an ahead-of-time compiled shared object run in process (cpu_backend.h, PAYLOAD.md).
#include "cpu_backend.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "etmlir/runtime/event_tracer.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/payload_header.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace {

// ---- The payload (PAYLOAD.md): the shared header (payload_header.h), then an ELF shared object ----

constexpr uint32_t kAbiVersion = 1;  // PayloadHeader.body_version: the calling convention
constexpr const char* kBodyFormat = "elf-shared-object";
constexpr const char* kEntryName = "forward";
constexpr const char* kShapesEntryName = "shapes";
constexpr size_t kAlignment = 64;

#if defined(__x86_64__)
constexpr uint16_t kElfMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kElfMachine = EM_AARCH64;
#else
constexpr uint16_t kElfMachine = EM_NONE;
#endif

size_t round_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

// ---- The payload's C interface (PAYLOAD.md "Symbols") ---------------------------------

using ParallelBody = void (*)(void* arg, int64_t begin, int64_t end);
using ParallelFn = void (*)(void* ctx, int64_t n, ParallelBody body, void* arg);
using EntryFn = void (*)(void** args);
using PayloadAbiFn = int (*)();
using SetArenaFn = void (*)(void* base, uint64_t bytes);
using CounterFn = uint64_t (*)();
using SetParallelFn = void (*)(ParallelFn fn, void* ctx, int num_threads);
// Optional symbols (PAYLOAD.md "Timed regions and failures"): payloads built before them lack them.
using RegionFn = void (*)(void* ctx, int32_t region, int32_t debug_handle, int begin);
using SetTracerFn = void (*)(RegionFn fn, void* ctx);
using RunFn = int (*)(EntryFn entry, void** args);
using FailedHandleFn = int32_t (*)();
using FailureFn = const char* (*)();
using ResetArenaFn = void (*)();

// ---- Thread pool --------------------------------------------------------------------

// num_threads - 1 persistent workers plus the calling thread, shared by every
// delegate of one backend instance (one instance per thread count): a model
// cut into many delegates (a LLaMA decoder has 17) keeps one set of warm
// workers instead of one sleeping set per delegate. parallel_for splits
// [0, n) into min(num_threads, n) contiguous chunks: the caller runs chunk 0,
// then every thread claims the chunks left (one atomic counter, stamped with
// the loop's generation), so a worker that is late (descheduled: a VM's vCPU
// taken, another process's thread on its core) has its chunk run by the
// caller instead of holding the loop until it is scheduled again (the caller
// waits about 50 us first: kCallerSpin). A prompt worker claims a chunk long
// before the caller is done with chunk 0, so at two threads each thread keeps
// the same share of consecutive loops (and their data in its cache). A model is dozens of short parallel loops in a row,
// and waking a sleeping thread costs tens of microseconds (about 100 us on a
// VM), more than a small loop's chunk: so between loops a worker polls the
// loop counter for about a millisecond (kWorkerSpin) before it sleeps on a
// condition variable, which keeps it warm from one execute() to the next when
// they run back to back; the caller polls for about 50 us (kCallerSpin)
// before it waits for the workers to finish. Nothing is allocated per call.
// A loop started while one runs (a nested call, or two methods executing at
// once on different threads) runs serially on its caller. The worker tables
// are members (kCpuMaxThreads - 1 entries); the threads themselves (their
// stacks) are the system's, created when the first delegate of the instance
// is initialized and joined when the last one is destroyed.
class ThreadPool {
 public:
  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() { stop(); }

  // A delegate's hold on the pool: the first acquire() starts num_threads - 1
  // workers, the last release() joins them. Thread-safe (delegates of
  // different methods may be initialized and destroyed on different threads).
  Error acquire(int num_threads);
  void release();

  // The etmlir_parallel_fn given to the payload (ctx is the pool).
  static void parallel_for(void* ctx, int64_t n, ParallelBody body, void* arg);

 private:
  struct Worker {
    ThreadPool* pool;
    uint64_t seen;  // the last loop generation before it started: it has no chunk in that one or earlier
  };
  Error start(int num_threads);
  void stop();
  static void* worker_main(void* worker);
  void run_worker(uint64_t seen);
  // Claims an unclaimed chunk of loop `generation` (chunks in all), or returns -1 when none is left
  // or a newer loop has started.
  int claim(uint64_t generation, int chunks);
  // Runs chunk c of the current loop and counts it done; the last one done wakes a waiting caller.
  void run_chunk(int c, int64_t n, int chunks, ParallelBody body, void* arg, bool caller);
  void chunk(int c, int64_t n, int chunks, int64_t* begin, int64_t* end) const {
    int64_t base = n / chunks;
    int64_t extra = n % chunks;
    *begin = c * base + (c < extra ? c : extra);
    *end = *begin + base + (c < extra ? 1 : 0);
  }

  // Polls of an atomic before sleeping, each a pause instruction (about 25 ns on x86-64): a worker
  // between loops about 1 ms, the caller waiting for its workers about 50 us.
  static constexpr int kWorkerSpin = 40000;
  static constexpr int kCallerSpin = 2000;
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t wake_ = PTHREAD_COND_INITIALIZER;
  pthread_cond_t done_ = PTHREAD_COND_INITIALIZER;
  pthread_mutex_t users_mutex_ = PTHREAD_MUTEX_INITIALIZER;  // guards users_ and starting or stopping
  int users_ = 0;                                             // delegates holding the pool
  pthread_t threads_[kCpuMaxThreads - 1] = {};
  Worker workers_[kCpuMaxThreads - 1] = {};
  int num_started_ = 0;   // running (joined by stop)
  std::atomic<bool> stopping_{false};
  // One per parallel loop; the loop's fields below are written before it is incremented (under the
  // mutex, release) and read after it is seen (acquire).
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // chunks other than the caller's first not yet done
  // The loop's next unclaimed chunk in the low kClaimBits bits, its generation above them: a claim is
  // a compare-and-swap, so a thread still reading an older loop's fields never takes a newer loop's chunk.
  static constexpr int kClaimBits = 16;
  static constexpr uint64_t kClaimMask = (uint64_t{1} << kClaimBits) - 1;
  static_assert(kCpuMaxThreads <= kClaimMask, "chunk indices must fit below the generation");
  std::atomic<uint64_t> claim_{0};
  int64_t n_ = 0;
  int chunks_ = 0;
  ParallelBody body_ = nullptr;
  void* arg_ = nullptr;
  std::atomic<bool> busy_{false};
};

Error ThreadPool::acquire(int num_threads) {
  pthread_mutex_lock(&users_mutex_);
  Error error = users_ == 0 ? start(num_threads) : Error::ok();
  if (!error) ++users_;
  pthread_mutex_unlock(&users_mutex_);
  return error;
}

void ThreadPool::release() {
  pthread_mutex_lock(&users_mutex_);
  if (users_ > 0 && --users_ == 0) stop();
  pthread_mutex_unlock(&users_mutex_);
}

Error ThreadPool::start(int num_threads) {
  stopping_.store(false, std::memory_order_relaxed);
  for (int w = 0; w < num_threads - 1 && w < kCpuMaxThreads - 1; ++w) {
    workers_[w] = Worker{this, generation_.load(std::memory_order_acquire)};
    int rc = pthread_create(&threads_[w], nullptr, &ThreadPool::worker_main, &workers_[w]);
    if (rc != 0) {
      stop();
      return Error::make(ErrorCode::Internal, "cannot start thread %d of %d for the thread pool: %s", w + 2,
                         num_threads, std::strerror(rc));
    }
    ++num_started_;
  }
  return Error::ok();
}

void ThreadPool::stop() {
  if (num_started_ > 0) {
    pthread_mutex_lock(&mutex_);
    stopping_.store(true, std::memory_order_release);
    pthread_cond_broadcast(&wake_);
    pthread_mutex_unlock(&mutex_);
    for (int w = 0; w < num_started_; ++w) pthread_join(threads_[w], nullptr);
    num_started_ = 0;
  }
}

void* ThreadPool::worker_main(void* worker) {
  Worker* w = static_cast<Worker*>(worker);
  w->pool->run_worker(w->seen);
  return nullptr;
}

void ThreadPool::run_worker(uint64_t seen) {
  for (;;) {
    uint64_t generation = generation_.load(std::memory_order_acquire);
    for (int i = 0; i < kWorkerSpin && generation == seen && !stopping_.load(std::memory_order_relaxed); ++i) {
      relax();
      generation = generation_.load(std::memory_order_acquire);
    }
    if (generation == seen) {
      pthread_mutex_lock(&mutex_);
      while (!stopping_.load(std::memory_order_relaxed) && generation_.load(std::memory_order_acquire) == seen)
        pthread_cond_wait(&wake_, &mutex_);
      generation = generation_.load(std::memory_order_acquire);
      pthread_mutex_unlock(&mutex_);
    }
    if (stopping_.load(std::memory_order_acquire)) break;
    int chunks = chunks_;
    int64_t n = n_;
    ParallelBody body = body_;
    void* arg = arg_;
    // A newer loop started while these were read: this worker had no chunk in the one it saw (its
    // caller waits for every chunk before it starts another loop); read the newer one's instead.
    if (generation_.load(std::memory_order_acquire) != generation) continue;
    seen = generation;
    for (int c; (c = claim(generation, chunks)) >= 0;) run_chunk(c, n, chunks, body, arg, false);
  }
}

int ThreadPool::claim(uint64_t generation, int chunks) {
  const uint64_t stamp = generation << kClaimBits;
  uint64_t v = claim_.load(std::memory_order_acquire);
  for (;;) {
    uint64_t c = v & kClaimMask;
    if ((v & ~kClaimMask) != stamp || c >= static_cast<uint64_t>(chunks)) return -1;
    if (claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      return static_cast<int>(c);
  }
}

void ThreadPool::run_chunk(int c, int64_t n, int chunks, ParallelBody body, void* arg, bool caller) {
  int64_t begin, end;
  chunk(c, n, chunks, &begin, &end);
  body(arg, begin, end);
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 && !caller) {
    // The caller may be asleep on done_: it checks pending_ under the mutex before it waits.
    pthread_mutex_lock(&mutex_);
    pthread_cond_signal(&done_);
    pthread_mutex_unlock(&mutex_);
  }
}

void ThreadPool::parallel_for(void* ctx, int64_t n, ParallelBody body, void* arg) {
  if (n <= 0 || body == nullptr) return;
  ThreadPool* pool = static_cast<ThreadPool*>(ctx);
  int chunks = pool == nullptr ? 1 : pool->num_started_ + 1;
  if (n < chunks) chunks = static_cast<int>(n);
  if (chunks <= 1 || pool->busy_.exchange(true, std::memory_order_acquire)) {
    body(arg, 0, n);
    return;
  }
  pthread_mutex_lock(&pool->mutex_);
  pool->n_ = n;
  pool->chunks_ = chunks;
  pool->body_ = body;
  pool->arg_ = arg;
  pool->pending_.store(chunks - 1, std::memory_order_relaxed);
  uint64_t generation = pool->generation_.load(std::memory_order_relaxed) + 1;
  pool->claim_.store(generation << kClaimBits | 1, std::memory_order_relaxed);  // chunk 0 is the caller's
  pool->generation_.store(generation, std::memory_order_release);
  pthread_cond_broadcast(&pool->wake_);
  pthread_mutex_unlock(&pool->mutex_);
  int64_t begin, end;
  pool->chunk(0, n, chunks, &begin, &end);
  body(arg, begin, end);
  // Chunks no worker has claimed within about kCallerSpin polls (its thread not scheduled since the loop
  // started) run here. Taking them at once would take a chunk from a worker only a few microseconds late.
  const uint64_t all_claimed = generation << kClaimBits | static_cast<uint64_t>(chunks);
  for (int i = 0; i < kCallerSpin && pool->claim_.load(std::memory_order_acquire) != all_claimed; ++i) relax();
  for (int c; (c = pool->claim(generation, chunks)) >= 0;) pool->run_chunk(c, n, chunks, body, arg, true);
  for (int i = 0; i < kCallerSpin && pool->pending_.load(std::memory_order_acquire) > 0; ++i) relax();
  if (pool->pending_.load(std::memory_order_acquire) > 0) {
    pthread_mutex_lock(&pool->mutex_);
    while (pool->pending_.load(std::memory_order_acquire) > 0) pthread_cond_wait(&pool->done_, &pool->mutex_);
    pthread_mutex_unlock(&pool->mutex_);
  }
  pool->busy_.store(false, std::memory_order_release);
}

// ---- Loading the shared object from memory -----------------------------------------

bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// dlopen() of `path`, unless a library of that name is already loaded: glibc
// hands back a loaded library whose name matches (and "/proc/self/fd/<n>"
// names repeat once an fd is closed), which would share another delegate's
// code and globals. *taken reports that case.
void* dlopen_fresh(const char* path, bool* taken, char* failure, size_t failure_size) {
  *taken = false;
  if (void* loaded = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    dlclose(loaded);
    *taken = true;
    return nullptr;
  }
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    std::snprintf(failure, failure_size, "%s", why ? why : "dlopen failed");
  }
  return handle;
}

// ---- Large read-only data on huge pages ----
//
// A payload's weights are read-only data in its shared object, mapped from the memfd (or temp file)
// in 4 KiB pages. Every run streams them through the caches, one TLB miss per 4 KiB; in a virtual
// machine each miss is a two-level page walk. So each read-only segment of at least two huge pages
// is copied into anonymous memory advised MADV_HUGEPAGE, moved (mremap) to the segment's own
// addresses, and made read-only again; the file's copy of those pages is then freed (punch hole).
// The same .pte loaded both ways, runs interleaved (Intel Xeon, a Firecracker VM): 1-2% faster on
// every benchmark model at 1 and 2 threads (ResNet-18, 77 MB of weights, 20.0 -> 19.7 ms at 1 thread;
// MobileNetV2 at 2 threads 4.92 -> 4.74 ms). Best effort: where a step fails (or the kernel has
// transparent huge pages off) the segment stays as dlopen mapped it.

std::atomic<uint64_t> g_total_huge_page_bytes{0};

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

bool transparent_huge_pages_off() {
  char mode[128] = "";
  FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == nullptr) return false;
  size_t n = std::fread(mode, 1, sizeof(mode) - 1, f);
  std::fclose(f);
  mode[n] = '\0';
  return std::strstr(mode, "[never]") != nullptr;
}

// Moves [start, start + size) (page aligned, read-only, mapped from `fd` at `offset`; fd < 0: do not
// free the file's pages) onto anonymous memory advised MADV_HUGEPAGE. Returns whether it moved.
bool move_onto_huge_pages(uintptr_t start, size_t size, int fd, off_t offset) {
#if defined(MADV_HUGEPAGE) && defined(MREMAP_FIXED)
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return false;
  // The copy sits at the segment's offset within a huge page, so the huge pages survive the move.
  uintptr_t r = reinterpret_cast<uintptr_t>(raw);
  uintptr_t tmp = r + ((start - r) & (kHugePage - 1));
  if (tmp > r) munmap(raw, tmp - r);
  munmap(reinterpret_cast<void*>(tmp + size), r + kHugePage - tmp);  // tmp < r + kHugePage: never empty
  void* copy = reinterpret_cast<void*>(tmp);
  madvise(copy, size, MADV_HUGEPAGE);
  std::memcpy(copy, reinterpret_cast<const void*>(start), size);
  if (mprotect(copy, size, PROT_READ) != 0 ||
      mremap(copy, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(start)) == MAP_FAILED) {
    munmap(copy, size);
    return false;
  }
#if defined(FALLOC_FL_PUNCH_HOLE)
  if (fd >= 0) fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, static_cast<off_t>(size));
#else
  (void)fd;
  (void)offset;
#endif
  return true;
#else
  (void)start;
  (void)size;
  (void)fd;
  (void)offset;
  return false;
#endif
}

struct SegmentWalk {
  uintptr_t base;  // the library's load bias
  int fd;
  uint64_t moved;
};

// Whether a library's PT_LOAD segment is large read-only data (its weights): worth huge pages.
bool large_read_only(const ElfW(Phdr)& ph) {
  return ph.p_type == PT_LOAD && (ph.p_flags & (PF_W | PF_X)) == 0 && ph.p_filesz >= 2 * kHugePage;
}

int move_library_segments(struct dl_phdr_info* info, size_t, void* arg) {
  auto* walk = static_cast<SegmentWalk*>(arg);
  if (info->dlpi_addr != walk->base) return 0;
  bool any = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) any = any || large_read_only(info->dlpi_phdr[i]);
  // The sysfs read only for a payload with weights to move (most delegates are small).
  if (!any || transparent_huge_pages_off()) return 1;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (!large_read_only(ph)) continue;
    uintptr_t begin = walk->base + ph.p_vaddr;
    uintptr_t start = (begin + page - 1) / page * page;
    uintptr_t end = (begin + ph.p_filesz) / page * page;
    off_t offset = static_cast<off_t>(ph.p_offset + (start - begin));
    if (end > start && move_onto_huge_pages(start, end - start, walk->fd, offset)) walk->moved += end - start;
  }
  return 1;
}

// The read-only segments of the library `handle` (loaded from `fd`, or -1) onto huge pages (glibc's
// dlinfo; elsewhere nothing moves).
void move_read_only_data_onto_huge_pages(void* handle, int fd) {
#if defined(__GLIBC__)
  struct link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return;
  SegmentWalk walk{static_cast<uintptr_t>(map->l_addr), fd, 0};
  dl_iterate_phdr(move_library_segments, &walk);
  g_total_huge_page_bytes.fetch_add(walk.moved, std::memory_order_relaxed);
#else
  (void)handle;
  (void)fd;
#endif
}

// Through memfd_create: no file on disk. The fd is closed once dlopen has mapped it.
void* load_from_memfd(const uint8_t* bytes, size_t size, char* failure, size_t failure_size, bool* tried) {
  *tried = false;
  int fd = memfd_create("etmlir-cpu-payload", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  *tried = true;
  if (!write_all(fd, bytes, size)) {
    std::snprintf(failure, failure_size, "cannot write %zu bytes to a memfd: %s", size, std::strerror(errno));
    close(fd);
    return nullptr;
  }
  void* handle = nullptr;
  for (int attempt = 0; attempt < 4096; ++attempt) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    bool taken = false;
    handle = dlopen_fresh(path, &taken, failure, failure_size);
    if (!taken) break;
    // Another delegate's library is named after this fd number: move to another number.
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
    close(fd);
    if (moved < 0) {
      std::snprintf(failure, failure_size, "cannot duplicate the memfd: %s", std::strerror(errno));
      return nullptr;
    }
    fd = moved;
  }
  move_read_only_data_onto_huge_pages(handle, fd);
  close(fd);
  return handle;
}

// Through a file in $TMPDIR (or /tmp), unlinked as soon as dlopen has mapped it.
void* load_from_temp_file(const uint8_t* bytes, size_t size, char* failure, size_t failure_size) {
  const char* dir = std::getenv("TMPDIR");
  if (dir == nullptr || *dir == '\0') dir = "/tmp";
  for (int attempt = 0; attempt < 16; ++attempt) {
    char path[4096];
    int n = std::snprintf(path, sizeof(path), "%s/etmlir-cpu-XXXXXX", dir);
    if (n < 0 || static_cast<size_t>(n) >= sizeof(path)) {
      std::snprintf(failure, failure_size, "TMPDIR is too long");
      return nullptr;
    }
    int fd = mkstemp(path);
    if (fd < 0) {
      std::snprintf(failure, failure_size, "cannot create a file in %.120s: %s", dir, std::strerror(errno));
      return nullptr;
    }
    bool written = write_all(fd, bytes, size);
    int saved = errno;
    close(fd);
    if (!written) {
      unlink(path);
      std::snprintf(failure, failure_size, "cannot write %zu bytes to %.120s: %s", size, path, std::strerror(saved));
      return nullptr;
    }
    bool taken = false;
    void* handle = dlopen_fresh(path, &taken, failure, failure_size);
    unlink(path);
    if (!taken) {
      move_read_only_data_onto_huge_pages(handle, -1);
      return handle;
    }
  }
  std::snprintf(failure, failure_size, "no unused file name in %.120s", dir);
  return nullptr;
}

// ---- The delegate -------------------------------------------------------------------------

struct ArgSpec {
  ScalarType dtype;
  int32_t rank;
  int64_t* sizes;  // rank entries, -1: dynamic
};

// What a payload's header asks of memory, known before anything is loaded:
// method_allocator_bytes() sizes the method allocator with it, init() takes it.
struct Layout {
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  size_t total_rank = 0;
  size_t total_output_rank = 0;
  bool any_dynamic_output = false;
  uint64_t arena_bytes = 0;
  const char* entry = nullptr;
  const char* shapes_entry = nullptr;  // nullptr: the header names none
  size_t num_args() const { return num_inputs + num_outputs; }
  size_t shape_words() const { return total_output_rank ? total_output_rank : 1; }
  size_t descriptor_words() const { return 3 * num_args() + 2 * total_rank; }
  // The block behind CpuDelegate's pointers (the order init() carves it in).
  size_t block_bytes() const {
    size_t n = num_args();
    return round_up(sizeof(ArgSpec) * n, 16) + round_up(sizeof(int64_t) * total_rank, 16) +
           round_up(sizeof(int64_t*) * n, 16) + round_up(sizeof(void*) * (n + 1), 16) +
           round_up(sizeof(void*) * (n + 1), 16) + round_up(sizeof(void*) * (num_inputs + 1), 16) +
           round_up(sizeof(int64_t) * descriptor_words(), 16) + round_up(sizeof(int64_t) * 5, 16) +
           round_up(sizeof(int64_t) * shape_words(), 16);
  }
  size_t arena_allocation() const { return arena_bytes ? round_up(static_cast<size_t>(arena_bytes), kAlignment) : 0; }
};

// Everything one delegate owns, in the method allocator: built at init, torn
// down at destroy (which frees nothing of that memory: it is the method's).
// While a traced execute() runs: where the payload's region events go (the payload's region hook
// gets a pointer to it). Regions do not nest, so one open event at a time.
struct RegionTrace {
  EventTracer* tracer = nullptr;
  uint32_t instruction = 0;
  uint16_t delegate = 0;
  uint32_t open = TraceEvent::kNoParent;

  // Ends the open region's event, if any (at a region's end, the next one's begin, or a failure).
  void close() {
    if (open == TraceEvent::kNoParent) return;
    tracer->end(open);
    open = TraceEvent::kNoParent;
  }
};

void on_region(void* ctx, int32_t region, int32_t debug_handle, int begin) {
  RegionTrace& trace = *static_cast<RegionTrace*>(ctx);
  trace.close();
  if (begin)
    trace.open = trace.tracer->begin(TraceEventKind::DelegateOp, debug_handle > 0 ? static_cast<uint32_t>(debug_handle) : 0,
                                     trace.instruction, trace.delegate, region > 0 ? static_cast<uint32_t>(region) : 0);
}

struct CpuDelegate {
  CpuDelegate() = default;
  CpuDelegate(const CpuDelegate&) = delete;
  CpuDelegate& operator=(const CpuDelegate&) = delete;
  ~CpuDelegate() {
    if (pool != nullptr) pool->release();
    if (library != nullptr) dlclose(library);
  }

  uint32_t index = 0;  // the delegate's place in its method, for messages
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  size_t num_args() const { return num_inputs + num_outputs; }
  ArgSpec* specs = nullptr;  // inputs, then outputs
  int64_t** descriptors = nullptr;  // per argument: {allocated, aligned, offset, sizes[r], strides[r]}
  void** descriptor_ptrs = nullptr;  // descriptor_ptrs[i] = descriptors[i] (+1: the shape buffer's)
  void** packed = nullptr;           // packed[i] = &descriptor_ptrs[i]: the entry's args
  void** shapes_packed = nullptr;    // the shapes entry's args: the inputs, then the shape buffer
  int64_t* shape_descriptor = nullptr;  // rank-1 i64 memref over `shapes`
  int64_t* shapes = nullptr;             // sum of output ranks (at least 1)
  bool any_dynamic_output = false;

  void* library = nullptr;  // dlopen'ed: the system's memory, dlclosed at destroy
  EntryFn entry = nullptr;
  EntryFn shapes_entry = nullptr;  // nullptr when the header names none; called only when an output is dynamic
  CounterFn heap_fallbacks = nullptr;
  CounterFn arena_peak = nullptr;
  // Optional (nullptr in payloads built before them): region events, and failures returned as errors.
  SetTracerFn set_tracer = nullptr;
  RunFn run = nullptr;
  FailedHandleFn failed_handle = nullptr;
  FailureFn failure = nullptr;
  ResetArenaFn reset_arena = nullptr;
  RegionTrace trace;
  void* arena = nullptr;
  uint64_t arena_bytes = 0;
  ThreadPool* pool = nullptr;  // the backend instance's, held from init to destroy (threads > 1)
  CpuDelegateStats stats;
};

// The most init() takes from the method allocator for `layout` (every piece
// plus its worst alignment padding).
size_t delegate_bytes(const Layout& layout) {
  return sizeof(CpuDelegate) + alignof(CpuDelegate) + layout.block_bytes() + 16 + layout.arena_allocation() +
         kAlignment;
}

std::atomic<uint64_t> g_total_heap_fallbacks{0};

// "float32[?, 4]"
const char* describe_spec(const ArgSpec& spec, char* buffer, size_t size) {
  return format_shape(spec.dtype, spec.sizes, static_cast<size_t>(spec.rank), nullptr, buffer, size);
}

class CpuBackend : public Backend {
 public:
  bool is_available() const override { return kElfMachine != EM_NONE; }
  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                              Span<const CompileSpec> compile_specs) override;
  Error execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) override;
  void destroy(DelegateHandle handle) override;
  Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> compile_specs) const override;
  uint64_t counter(const char* name) const override {
    if (std::strcmp(name, "heap_fallbacks") == 0) return cpu_backend_heap_fallbacks();
    if (std::strcmp(name, "huge_page_bytes") == 0) return g_total_huge_page_bytes.load(std::memory_order_relaxed);
    return 0;
  }
  BackendPayloadInfo payload_info() const override {
    BackendPayloadInfo info;
    info.body_format = kBodyFormat;
    info.min_body_version = info.max_body_version = kAbiVersion;
    info.native_code = true;
    return info;
  }

  int num_threads = 1;

 private:
  ThreadPool pool_;  // shared by this instance's delegates (num_threads > 1)
  Error load(CpuDelegate& d, const PayloadView& view, const Layout& layout, MemoryAllocator& allocator);
};

Error check_elf(const uint8_t* so, uint64_t size) {
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(so, ELFMAG, SELFMAG) != 0) {
    char got[40];
    return Error::make(ErrorCode::InvalidProgram, "the shared object is not an ELF file (it starts with \"%s\")",
                       printable_bytes(so, size < 4 ? size : 4, got, sizeof(got)));
  }
  if (so[EI_CLASS] != ELFCLASS64)
    return Error::make(ErrorCode::InvalidProgram, "the shared object is ELF class %u, not 64-bit (%u)", so[EI_CLASS],
                       ELFCLASS64);
  if (so[EI_DATA] != ELFDATA2LSB)
    return Error::make(ErrorCode::InvalidProgram, "the shared object is not little-endian (ELF data encoding %u)",
                       so[EI_DATA]);
  Elf64_Ehdr header;
  std::memcpy(&header, so, sizeof(header));
  if (header.e_machine != kElfMachine)
    return Error::make(ErrorCode::NotSupported,
                       "the shared object is for ELF machine %u, this runtime runs on %s (machine %u)",
                       header.e_machine, host_arch(), kElfMachine);
  if (header.e_type != ET_DYN)
    return Error::make(ErrorCode::InvalidProgram, "the ELF file is not a shared object (e_type %u, expected ET_DYN %u)",
                       header.e_type, ET_DYN);
  // What the loader maps must lie inside the file: glibc's dlopen maps
  // segments past the end of a truncated file and faults (SIGBUS) touching them.
  if (header.e_phnum == 0 || header.e_phentsize != sizeof(Elf64_Phdr))
    return Error::make(ErrorCode::InvalidProgram,
                       "the shared object has %u program headers of %u bytes (expected at least 1 of %zu bytes)",
                       header.e_phnum, header.e_phentsize, sizeof(Elf64_Phdr));
  uint64_t table_bytes = uint64_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (header.e_phoff > size || table_bytes > size - header.e_phoff)
    return Error::make(ErrorCode::InvalidProgram,
                       "the shared object's program headers (%u at offset %llu) lie outside its %llu bytes: it is "
                       "truncated or corrupt",
                       header.e_phnum, static_cast<unsigned long long>(header.e_phoff),
                       static_cast<unsigned long long>(size));
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, so + header.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), sizeof(segment));
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC) continue;
    if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset)
      return Error::make(ErrorCode::InvalidProgram,
                         "the shared object's segment %u (%s) covers bytes %llu to %llu, beyond its %llu bytes: "
                         "it is truncated or corrupt",
                         i, segment.p_type == PT_LOAD ? "PT_LOAD" : "PT_DYNAMIC",
                         static_cast<unsigned long long>(segment.p_offset),
                         static_cast<unsigned long long>(segment.p_offset + segment.p_filesz),
                         static_cast<unsigned long long>(size));
  }
  return Error::ok();
}


// Everything about the payload that can be checked before the shared object is
// loaded: the shared header (read_payload: framing, versions, backend id, specs,
// checksum), this backend's body format and calling convention, the machine, the
// entry points and the ELF header. Fills `layout`.
Error parse(Span<const uint8_t> payload, PayloadView* view, Layout* layout) {
  ET_CHECK_OK(read_payload(payload, "cpu", view));
  const payload_schema::PayloadHeader& h = *view->header;
  const char* format = h.body_format() ? h.body_format()->c_str() : "";
  if (std::strcmp(format, kBodyFormat) != 0) {
    char shown[80];
    return Error::make(ErrorCode::InvalidProgram, "payload body_format is '%s', not '%s'",
                       printable_bytes(reinterpret_cast<const uint8_t*>(format), std::strlen(format), shown, sizeof(shown)),
                       kBodyFormat);
  }
  if (h.body_version() != kAbiVersion)
    return Error::make(ErrorCode::NotSupported,
                       "payload body_version %u is not supported (this runtime calls abi_version %u)",
                       h.body_version(), kAbiVersion);
  if (h.arch() == nullptr || h.arch()->size() == 0)
    return Error::make(ErrorCode::InvalidProgram, "payload names no arch (this runtime runs on %s)", host_arch());
  ET_CHECK_OK(check_payload_target(h));

  layout->num_inputs = h.inputs() ? h.inputs()->size() : 0;
  layout->num_outputs = h.outputs() ? h.outputs()->size() : 0;
  for (size_t i = 0; i < layout->num_args(); ++i) {
    bool input = i < layout->num_inputs;
    const payload_schema::TensorSpec* spec =
        input ? h.inputs()->Get(static_cast<flatbuffers::uoffset_t>(i))
              : h.outputs()->Get(static_cast<flatbuffers::uoffset_t>(i - layout->num_inputs));
    size_t rank = spec->sizes() ? spec->sizes()->size() : 0;
    layout->total_rank += rank;
    if (!input) layout->total_output_rank += rank;
    for (size_t k = 0; k < rank && !input; ++k) {
      if (spec->sizes()->Get(static_cast<flatbuffers::uoffset_t>(k)) == -1) layout->any_dynamic_output = true;
    }
  }
  layout->entry = payload_entry_symbol(h, kEntryName);
  layout->shapes_entry = payload_entry_symbol(h, kShapesEntryName);
  if (layout->entry == nullptr)
    return Error::make(ErrorCode::InvalidProgram, "the header names no entry point '%s'", kEntryName);
  if (layout->any_dynamic_output && layout->shapes_entry == nullptr)
    return Error::make(ErrorCode::InvalidProgram,
                       "an output has dynamic dims (-1) but the header names no '%s' entry point", kShapesEntryName);
  layout->arena_bytes = h.scratch_bytes();
  if (layout->arena_bytes > SIZE_MAX / 2)
    return Error::make(ErrorCode::OutOfMemory, "the payload's arena of %llu bytes does not fit in memory",
                       static_cast<unsigned long long>(layout->arena_bytes));
  return check_elf(view->body.data(), view->body.size());
}

Error CpuBackend::load(CpuDelegate& d, const PayloadView& view, const Layout& layout, MemoryAllocator& allocator) {
  const payload_schema::PayloadHeader& h = *view.header;
  d.num_inputs = layout.num_inputs;
  d.num_outputs = layout.num_outputs;
  d.any_dynamic_output = layout.any_dynamic_output;
  size_t num_args = d.num_args();

  // ---- Memory for execute, from the method allocator: specs, descriptors, packed args, the shape buffer ----
  size_t bytes = layout.block_bytes();
  void* block = nullptr;
  ET_CHECK_OK(allocate_at_init(allocator, bytes, 16, "the argument descriptors", &block));
  std::memset(block, 0, bytes);
  uint8_t* at = static_cast<uint8_t*>(block);
  auto carve = [&at](size_t n) {
    void* out = at;
    at += round_up(n, 16);
    return out;
  };
  d.specs = static_cast<ArgSpec*>(carve(sizeof(ArgSpec) * num_args));
  int64_t* spec_sizes = static_cast<int64_t*>(carve(sizeof(int64_t) * layout.total_rank));
  d.descriptors = static_cast<int64_t**>(carve(sizeof(int64_t*) * num_args));
  d.descriptor_ptrs = static_cast<void**>(carve(sizeof(void*) * (num_args + 1)));
  d.packed = static_cast<void**>(carve(sizeof(void*) * (num_args + 1)));
  d.shapes_packed = static_cast<void**>(carve(sizeof(void*) * (d.num_inputs + 1)));
  int64_t* descriptor_words_at = static_cast<int64_t*>(carve(sizeof(int64_t) * layout.descriptor_words()));
  d.shape_descriptor = static_cast<int64_t*>(carve(sizeof(int64_t) * 5));
  d.shapes = static_cast<int64_t*>(carve(sizeof(int64_t) * layout.shape_words()));

  for (size_t i = 0; i < num_args; ++i) {
    bool input = i < d.num_inputs;
    const payload_schema::TensorSpec* fb =
        input ? h.inputs()->Get(static_cast<flatbuffers::uoffset_t>(i))
              : h.outputs()->Get(static_cast<flatbuffers::uoffset_t>(i - d.num_inputs));
    ArgSpec& spec = d.specs[i];
    spec.dtype = static_cast<ScalarType>(fb->scalar_type());
    spec.rank = static_cast<int32_t>(fb->sizes() ? fb->sizes()->size() : 0);
    spec.sizes = spec_sizes;
    for (int32_t k = 0; k < spec.rank; ++k) spec.sizes[k] = fb->sizes()->Get(static_cast<flatbuffers::uoffset_t>(k));
    spec_sizes += spec.rank;
    d.descriptors[i] = descriptor_words_at;
    descriptor_words_at += 3 + 2 * spec.rank;
    d.descriptor_ptrs[i] = d.descriptors[i];
    d.packed[i] = &d.descriptor_ptrs[i];
    if (input) d.shapes_packed[i] = &d.descriptor_ptrs[i];
  }
  // The shape buffer: a rank-1 i64 memref, the shapes entry's last argument.
  d.shape_descriptor[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(d.shapes));
  d.shape_descriptor[1] = d.shape_descriptor[0];
  d.shape_descriptor[2] = 0;
  d.shape_descriptor[3] = static_cast<int64_t>(layout.total_output_rank);
  d.shape_descriptor[4] = 1;
  d.descriptor_ptrs[num_args] = d.shape_descriptor;
  d.shapes_packed[d.num_inputs] = &d.descriptor_ptrs[num_args];

  // The arena, before the library: a method allocator that is too small fails before any dlopen.
  d.arena_bytes = layout.arena_bytes;
  if (d.arena_bytes > 0)
    ET_CHECK_OK(allocate_at_init(allocator, layout.arena_allocation(), kAlignment, "the payload's arena", &d.arena));

  // ---- The shared object: loaded from memory, its symbols resolved once ----
  const uint8_t* so = view.body.data();
  size_t so_bytes = view.body.size();
  char failure[200] = "";
  bool tried_memfd = false;
  d.library = load_from_memfd(so, so_bytes, failure, sizeof(failure), &tried_memfd);
  if (d.library == nullptr) {
    // No memfd_create, or a memfd the system will not map executable: a file in $TMPDIR.
    char temp_failure[200] = "";
    d.library = load_from_temp_file(so, so_bytes, temp_failure, sizeof(temp_failure));
    if (d.library == nullptr)
      return Error::make(ErrorCode::InvalidProgram, "cannot load the shared object: %s",
                         tried_memfd ? failure : temp_failure);
  }
  auto resolve = [&d](const char* name) { return dlsym(d.library, name); };
  struct Required {
    const char* name;
    void* address;
  } required[] = {{"etmlir_cpu_payload_abi", nullptr},
                  {"etmlir_cpu_set_arena", nullptr},
                  {"etmlir_cpu_heap_fallbacks", nullptr},
                  {"etmlir_cpu_arena_peak", nullptr},
                  {"etmlir_cpu_set_parallel", nullptr}};
  void* entry_address = resolve(layout.entry);
  if (entry_address == nullptr)
    return Error::make(ErrorCode::InvalidProgram, "the shared object does not export the entry point '%s'",
                       layout.entry);
  void* shapes_address = nullptr;
  if (layout.shapes_entry != nullptr) {
    shapes_address = resolve(layout.shapes_entry);
    if (shapes_address == nullptr)
      return Error::make(ErrorCode::InvalidProgram, "the shared object does not export the shapes entry point '%s'",
                         layout.shapes_entry);
  }
  for (Required& r : required) {
    r.address = resolve(r.name);
    if (r.address == nullptr)
      return Error::make(ErrorCode::InvalidProgram,
                         "the shared object does not export '%s' (required by abi_version %u)", r.name, kAbiVersion);
  }
  // Optional: a payload has all of the failure symbols or none of them.
  d.set_tracer = reinterpret_cast<SetTracerFn>(resolve("etmlir_cpu_set_tracer"));
  d.run = reinterpret_cast<RunFn>(resolve("etmlir_cpu_run"));
  d.failed_handle = reinterpret_cast<FailedHandleFn>(resolve("etmlir_cpu_failed_handle"));
  d.failure = reinterpret_cast<FailureFn>(resolve("etmlir_cpu_failure"));
  d.reset_arena = reinterpret_cast<ResetArenaFn>(resolve("etmlir_cpu_reset_arena"));
  if (d.run == nullptr || d.failed_handle == nullptr || d.failure == nullptr || d.reset_arena == nullptr)
    d.run = nullptr;
  d.entry = reinterpret_cast<EntryFn>(entry_address);
  d.shapes_entry = reinterpret_cast<EntryFn>(shapes_address);
  auto payload_abi = reinterpret_cast<PayloadAbiFn>(required[0].address);
  auto set_arena = reinterpret_cast<SetArenaFn>(required[1].address);
  d.heap_fallbacks = reinterpret_cast<CounterFn>(required[2].address);
  d.arena_peak = reinterpret_cast<CounterFn>(required[3].address);
  auto set_parallel = reinterpret_cast<SetParallelFn>(required[4].address);
  int so_abi = payload_abi();
  if (so_abi < 0 || static_cast<uint32_t>(so_abi) != kAbiVersion)
    return Error::make(ErrorCode::InvalidProgram,
                       "the shared object's etmlir_cpu_payload_abi() returns %d; the header says %u", so_abi,
                       h.body_version());

  // ---- The arena and the thread pool ----
  if (d.arena_bytes > 0) set_arena(d.arena, d.arena_bytes);
  if (num_threads > 1) {
    ET_CHECK_OK(pool_.acquire(num_threads));
    d.pool = &pool_;
    set_parallel(&ThreadPool::parallel_for, &pool_, num_threads);
  } else {
    set_parallel(nullptr, nullptr, 1);
  }
  d.stats.arena_bytes = d.arena_bytes;
  d.stats.num_threads = num_threads;
  d.stats.heap_fallbacks = d.heap_fallbacks();
  d.stats.arena_peak = d.arena_peak();
  return Error::ok();
}

Result<size_t> CpuBackend::method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                                  Span<const CompileSpec> /*compile_specs*/) const {
  PayloadView view;
  Layout layout;
  if (Error error = parse(payload, &view, &layout)) {
    error.prefix("cpu delegate %u", context.delegate_index);
    return error;
  }
  return delegate_bytes(layout);
}

Result<DelegateHandle> CpuBackend::init(BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> /*compile_specs*/) {
  // The payload is machine code: it runs only if the host allowed native code or trusts a key that signed
  // these exact bytes. Checked first, before anything of it is written to a file or mapped.
  if (Error error = check_native_code(context, payload)) {
    error.prefix("cpu delegate %u", context.delegate_index);
    return error;
  }
  PayloadView view;
  Layout layout;
  if (Error error = parse(payload, &view, &layout)) {
    error.prefix("cpu delegate %u", context.delegate_index);
    return error;
  }
  if (context.method_allocator == nullptr)
    return Error::make(ErrorCode::InvalidArgument, "cpu delegate %u: init needs a method allocator",
                       context.delegate_index);
  MemoryAllocator& allocator = *context.method_allocator;
  void* memory = nullptr;
  if (Error error = allocate_at_init(allocator, sizeof(CpuDelegate), alignof(CpuDelegate), "the delegate state", &memory)) {
    error.prefix("cpu delegate %u", context.delegate_index);
    return error;
  }
  CpuDelegate* delegate = new (memory) CpuDelegate();
  delegate->index = context.delegate_index;
  if (Error error = load(*delegate, view, layout, allocator)) {
    delegate->~CpuDelegate();
    error.prefix("cpu delegate %u", context.delegate_index);
    return error;
  }
  return DelegateHandle(delegate);
}

// Points argument i's descriptor at the tensor (contiguous, offset 0).
void fill_descriptor(int64_t* words, const Tensor& t) {
  int64_t address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.mutable_data()));
  words[0] = address;
  words[1] = address;
  words[2] = 0;
  int32_t rank = t.dim();
  int64_t stride = 1;
  for (int32_t k = rank - 1; k >= 0; --k) {
    words[3 + k] = t.size(k);
    words[3 + rank + k] = stride;
    stride *= t.size(k);
  }
}

// Calls one of the payload's entry points. A failed run-time check (et-cpu-report-failures) comes
// back as KernelFailed naming the check, with the edge op's debug handle in `context` (the method
// turns it into a source line); the arena is reset, since the failed run's buffers stay allocated.
// (A region the failure left open is closed by the RegionTraceScope around the call.)
Error call_entry(CpuDelegate& d, EntryFn entry, void** args, BackendExecuteContext& context) {
  if (d.run == nullptr) {
    entry(args);
    return Error::ok();
  }
  if (d.run(entry, args) == 0) return Error::ok();
  d.reset_arena();
  int32_t failed = d.failed_handle();
  context.failed_debug_handle = failed > 0 ? static_cast<uint32_t>(failed) : 0;
  return Error::make(ErrorCode::KernelFailed, "cpu delegate %u: %s", d.index, d.failure());
}

// Points the payload's region hook at the tracer for one execute(), and away again.
class RegionTraceScope {
 public:
  RegionTraceScope(CpuDelegate& d, const BackendExecuteContext& context) : d_(d) {
    active_ = context.tracer != nullptr && d.set_tracer != nullptr;
    if (!active_) return;
    d.trace.tracer = context.tracer;
    d.trace.instruction = context.instruction;
    d.trace.delegate = context.delegate_index;
    d.set_tracer(&on_region, &d.trace);
  }
  ~RegionTraceScope() {
    if (!active_) return;
    d_.set_tracer(nullptr, nullptr);
    d_.trace.close();
    d_.trace = RegionTrace{};
  }
  RegionTraceScope(const RegionTraceScope&) = delete;
  RegionTraceScope& operator=(const RegionTraceScope&) = delete;

 private:
  CpuDelegate& d_;
  bool active_ = false;
};

Error CpuBackend::execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) {
  CpuDelegate& d = *static_cast<CpuDelegate*>(handle);
  char expected[128];
  char given[128];
  if (args.size() != d.num_args())
    return Error::make(ErrorCode::InvalidProgram,
                       "cpu delegate %u: the call passes %zu argument%s; the payload takes %zu (%zu input%s, then "
                       "%zu output%s)",
                       d.index, args.size(), plural(args.size()), d.num_args(), d.num_inputs, plural(d.num_inputs),
                       d.num_outputs, plural(d.num_outputs));
  for (size_t i = 0; i < args.size(); ++i) {
    bool input = i < d.num_inputs;
    size_t which = input ? i : i - d.num_inputs;
    const char* kind = input ? "input" : "output";
    if (!args[i]->is_tensor())
      return Error::make(ErrorCode::InvalidProgram, "cpu delegate %u: argument %zu (%s %zu) is a %s, not a tensor",
                         d.index, i, kind, which, tag_name(args[i]->tag));
    const Tensor& t = args[i]->to_tensor();
    const ArgSpec& spec = d.specs[i];
    bool matches = t.dtype() == spec.dtype && t.dim() == spec.rank;
    // Inputs: every static dim as specified. Outputs: resized below.
    for (int32_t k = 0; matches && input && k < spec.rank; ++k)
      matches = spec.sizes[k] < 0 || spec.sizes[k] == t.size(k);
    if (!matches)
      return Error::make(ErrorCode::InvalidArgument, "cpu delegate %u: argument %zu (%s %zu): expected %s, got %s",
                         d.index, i, kind, which, describe_spec(spec, expected, sizeof(expected)),
                         t.describe(given, sizeof(given)));
    if (input && t.nbytes() > 0 && t.data() == nullptr)
      return Error::make(ErrorCode::InvalidArgument, "cpu delegate %u: argument %zu (input %zu) %s has no data",
                         d.index,
                         i, which, t.describe(given, sizeof(given)));
    if (input) fill_descriptor(d.descriptors[i], t);
  }

  // Output sizes: from the shapes entry when an output is dynamic, else the spec's.
  bool computed = d.shapes_entry != nullptr && d.any_dynamic_output;
  if (computed) ET_CHECK_OK(call_entry(d, d.shapes_entry, d.shapes_packed, context));
  const int64_t* sizes = d.shapes;
  for (size_t o = 0; o < d.num_outputs; ++o) {
    size_t i = d.num_inputs + o;
    const ArgSpec& spec = d.specs[i];
    const int64_t* want = computed ? sizes : spec.sizes;
    for (int32_t k = 0; k < spec.rank; ++k) {
      if (want[k] < 0 || (spec.sizes[k] >= 0 && want[k] != spec.sizes[k]))
        return Error::make(ErrorCode::KernelFailed,
                           "cpu delegate %u: the shapes entry gave output %zu size %lld for dim %d; its spec is %s",
                           d.index, o, static_cast<long long>(want[k]), k,
                           describe_spec(spec, expected, sizeof(expected)));
    }
    sizes += spec.rank;
    Tensor& t = args[i]->to_tensor();
    bool same = true;
    for (int32_t k = 0; k < spec.rank; ++k) same = same && t.size(k) == want[k];
    if (!same) {
      char name[32];
      std::snprintf(name, sizeof(name), "output %zu", o);
      Error error = t.resize(Span<const int64_t>(want, static_cast<size_t>(spec.rank)), name);
      if (error) return error.prefix("cpu delegate %u", d.index);
    }
    if (t.nbytes() > 0 && (t.mutable_data() == nullptr || t.capacity() < t.nbytes()))
      return Error::make(ErrorCode::OutOfMemory, "cpu delegate %u: output %zu %s has %zu bytes of memory; it needs %zu",
                         d.index, o, t.describe(given, sizeof(given)), t.capacity(), t.nbytes());
    fill_descriptor(d.descriptors[i], t);
  }

  {
    RegionTraceScope traced(d, context);
    ET_CHECK_OK(call_entry(d, d.entry, d.packed, context));
  }

  ++d.stats.executes;
  uint64_t fallbacks = d.heap_fallbacks();
  if (fallbacks > d.stats.heap_fallbacks)
    g_total_heap_fallbacks.fetch_add(fallbacks - d.stats.heap_fallbacks, std::memory_order_relaxed);
  d.stats.heap_fallbacks = fallbacks;
  d.stats.arena_peak = d.arena_peak();
  return Error::ok();
}

void CpuBackend::destroy(DelegateHandle handle) {
  // Stops the pool and dlcloses the library; the memory is the method allocator's.
  static_cast<CpuDelegate*>(handle)->~CpuDelegate();
}

// One instance per thread count, made on first use.
CpuBackend* backend_for(int num_threads) {
  static CpuBackend* table = [] {
    static CpuBackend storage[kCpuMaxThreads];
    for (int i = 0; i < kCpuMaxThreads; ++i) storage[i].num_threads = i + 1;
    return storage;
  }();
  return &table[num_threads - 1];
}

}  // namespace

Error register_cpu_backend(BackendRegistry& registry, const BackendOptions& options) {
  if (options.threads < 1 || options.threads > kCpuMaxThreads)
    return Error::make(ErrorCode::InvalidArgument, "cpu backend: num_threads must be 1 to %d, got %d", kCpuMaxThreads,
                       options.threads);
  return registry.add("cpu", backend_for(options.threads));
}

uint64_t cpu_backend_supported_features() { return host_cpu_features(); }

const char* cpu_backend_arch() { return host_arch(); }

CpuDelegateStats cpu_backend_stats(DelegateHandle handle) {
  if (handle == nullptr) return CpuDelegateStats{};
  return static_cast<const CpuDelegate*>(handle)->stats;
}

uint64_t cpu_backend_heap_fallbacks() { return g_total_heap_fallbacks.load(std::memory_order_relaxed); }

}  // namespace etmlir
