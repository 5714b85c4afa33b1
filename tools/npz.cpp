// .npy/.npz reading for et-run: see npz.h. Zip layout (APPNOTE.TXT): the
// end-of-central-directory record at the end of the file points at the
// central directory, whose entries point at each entry's local header; the
// stored (method 0) bytes follow the local header. Sizes and offsets come from
// the central directory, widened by its ZIP64 extra field where numpy wrote one.
#include "npz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace etmlir {
namespace tools {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndOfCentralDirSize = 22;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndSize = 56;
constexpr uint16_t kZip64ExtraId = 0x0001;

const uint8_t kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t read_u64(const uint8_t* p) { return read_u32(p) | (static_cast<uint64_t>(read_u32(p + 4)) << 32); }

// True when [offset, offset + length) lies inside a buffer of `size` bytes.
bool in_bounds(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

uint32_t crc32(const uint8_t* data, size_t size) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// ---- .npy header: a Python dict literal ---------------------------------------

struct HeaderParser {
  const char* p;
  const char* end;

  void skip_space() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool take(char c) {
    skip_space();
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  bool take_word(const char* word) {
    skip_space();
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end - p) >= n && std::memcmp(p, word, n) == 0) {
      p += n;
      return true;
    }
    return false;
  }
  // A quoted string without escapes (numpy never writes any in a header).
  bool string(std::string* out) {
    skip_space();
    if (p >= end || (*p != '\'' && *p != '"')) return false;
    char quote = *p++;
    const char* start = p;
    while (p < end && *p != quote) {
      if (*p == '\\') return false;
      ++p;
    }
    if (p >= end) return false;
    out->assign(start, static_cast<size_t>(p - start));
    ++p;
    return true;
  }
  bool integer(int64_t* out) {
    skip_space();
    if (p >= end || *p < '0' || *p > '9') return false;
    int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (*p++ - '0');
    }
    if (p < end && *p == 'L') ++p;  // Python 2 longs
    *out = v;
    return true;
  }
};

struct DtypeName {
  const char* descr;
  ScalarType dtype;
};
const DtypeName kDtypes[] = {
    {"<f4", ScalarType::Float}, {"<f8", ScalarType::Double}, {"<f2", ScalarType::Half},
    {"<i8", ScalarType::Int64}, {"<i4", ScalarType::Int32},  {"<i2", ScalarType::Int16},
    {"|i1", ScalarType::Int8},  {"|u1", ScalarType::UInt8},  {"|b1", ScalarType::Bool},
};

Error npy_error(const char* name, const char* what) {
  return Error::make(ErrorCode::InvalidArgument, "%s: %s", name, what);
}

}  // namespace

Error parse_npy(const uint8_t* data, size_t size, const char* name, NpyArray* out) {
  if (size < 10 || std::memcmp(data, kNpyMagic, sizeof(kNpyMagic)) != 0)
    return npy_error(name, "not an .npy array (no \\x93NUMPY magic)");
  uint8_t major = data[6];
  size_t header_start = 0;
  uint64_t header_len = 0;
  if (major == 1) {
    header_start = 10;
    header_len = read_u16(data + 8);
  } else if (major == 2 || major == 3) {
    if (size < 12) return npy_error(name, "truncated .npy header");
    header_start = 12;
    header_len = read_u32(data + 8);
  } else {
    return Error::make(ErrorCode::InvalidArgument, "%s: .npy format version %u is not supported (1, 2 or 3)", name,
                       static_cast<unsigned>(major));
  }
  if (!in_bounds(header_start, header_len, size))
    return Error::make(ErrorCode::InvalidArgument, "%s: .npy header of %llu bytes runs past the end (%zu bytes)", name,
                       static_cast<unsigned long long>(header_len), size);

  HeaderParser parser{reinterpret_cast<const char*>(data + header_start),
                      reinterpret_cast<const char*>(data + header_start + header_len)};
  std::string descr;
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::vector<int64_t> shape;
  if (!parser.take('{')) return npy_error(name, "malformed .npy header (expected a dict)");
  while (!parser.take('}')) {
    std::string key;
    if (!parser.string(&key) || !parser.take(':')) return npy_error(name, "malformed .npy header (expected 'key':)");
    if (key == "descr") {
      if (!parser.string(&descr)) return npy_error(name, "structured (record) arrays are not supported");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (parser.take_word("True")) {
        fortran = true;
      } else if (!parser.take_word("False")) {
        return npy_error(name, "malformed .npy header (fortran_order is not True/False)");
      }
      have_order = true;
    } else if (key == "shape") {
      if (!parser.take('(')) return npy_error(name, "malformed .npy header (shape is not a tuple)");
      while (!parser.take(')')) {
        int64_t dim = 0;
        if (!parser.integer(&dim)) return npy_error(name, "malformed .npy header (bad shape entry)");
        if (shape.size() >= static_cast<size_t>(kMaxDims))
          return Error::make(ErrorCode::InvalidArgument, "%s: more than %d dims", name, kMaxDims);
        shape.push_back(dim);
        if (!parser.take(',')) {
          if (!parser.take(')')) return npy_error(name, "malformed .npy header (shape tuple not closed)");
          break;
        }
      }
      have_shape = true;
    } else {
      return Error::make(ErrorCode::InvalidArgument, "%s: unexpected .npy header key '%s'", name, key.c_str());
    }
    if (!parser.take(',')) {
      if (!parser.take('}')) return npy_error(name, "malformed .npy header (expected ',' or '}')");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    return npy_error(name, "malformed .npy header (needs descr, fortran_order and shape)");
  if (fortran && shape.size() > 1)
    return npy_error(name, "fortran-order arrays are not supported (save np.ascontiguousarray(a))");

  const DtypeName* found = nullptr;
  for (const DtypeName& d : kDtypes) {
    if (descr == d.descr) found = &d;
  }
  if (found == nullptr) {
    if (!descr.empty() && descr[0] == '>')
      return Error::make(ErrorCode::InvalidArgument, "%s: big-endian dtype '%s' is not supported", name,
                         descr.c_str());
    return Error::make(ErrorCode::InvalidArgument,
                       "%s: dtype '%s' is not supported (float32/64/16, int64/32/16/8, uint8, bool)", name,
                       descr.c_str());
  }

  uint64_t nbytes = element_size(found->dtype);
  for (int64_t dim : shape) {
    uint64_t d = static_cast<uint64_t>(dim);
    if (d != 0 && nbytes > UINT64_MAX / d) return npy_error(name, "shape is too large");
    nbytes *= d;
  }
  uint64_t data_offset = header_start + header_len;
  uint64_t available = size - data_offset;
  if (available != nbytes)
    return Error::make(ErrorCode::InvalidArgument,
                       "%s: a '%s' array with %zu dims needs %llu data bytes, the file has %llu", name,
                       descr.c_str(), shape.size(), static_cast<unsigned long long>(nbytes),
                       static_cast<unsigned long long>(available));
  out->name = name;
  out->dtype = found->dtype;
  out->shape = shape;
  out->data = data + data_offset;
  out->nbytes = static_cast<size_t>(nbytes);
  return Error::ok();
}

namespace {

// The entry name as printable ASCII (other bytes as \xNN), for messages and keys.
std::string printable(const uint8_t* bytes, size_t size) {
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    if (bytes[i] >= 0x20 && bytes[i] < 0x7F && bytes[i] != '\\') {
      out += static_cast<char>(bytes[i]);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", bytes[i]);
      out += escaped;
    }
  }
  return out;
}

Error zip_error(const char* label, const char* what) {
  return Error::make(ErrorCode::InvalidArgument, "%s: %s", label, what);
}

// Where the central directory is and how many entries it has.
Error find_central_directory(const uint8_t* data, size_t size, const char* label, uint64_t* cd_offset,
                             uint64_t* cd_size, uint64_t* entries) {
  if (size < kEndOfCentralDirSize) return zip_error(label, "not an .npz file (too short for a zip archive)");
  // The record is the last thing in the file but for a comment of up to 64 KiB.
  size_t lowest = size - kEndOfCentralDirSize > 0xFFFF ? size - kEndOfCentralDirSize - 0xFFFF : 0;
  size_t pos = size - kEndOfCentralDirSize;
  for (;; --pos) {
    if (read_u32(data + pos) == kEndOfCentralDirSig &&
        pos + kEndOfCentralDirSize + read_u16(data + pos + 20) == size)
      break;
    if (pos == lowest) return zip_error(label, "not an .npz file (no zip end-of-central-directory record)");
  }
  const uint8_t* eocd = data + pos;
  if (read_u16(eocd + 4) != 0 || read_u16(eocd + 6) != 0)
    return zip_error(label, "multi-disk zip archives are not supported");
  *entries = read_u16(eocd + 10);
  *cd_size = read_u32(eocd + 12);
  *cd_offset = read_u32(eocd + 16);
  // ZIP64: a locator right before the record points at the 64-bit record.
  if (pos >= kZip64LocatorSize && read_u32(data + pos - kZip64LocatorSize) == kZip64LocatorSig) {
    uint64_t end64 = read_u64(data + pos - kZip64LocatorSize + 8);
    if (!in_bounds(end64, kZip64EndSize, size) || read_u32(data + end64) != kZip64EndSig)
      return zip_error(label, "corrupt zip (bad ZIP64 end-of-central-directory record)");
    *entries = read_u64(data + end64 + 32);
    *cd_size = read_u64(data + end64 + 40);
    *cd_offset = read_u64(data + end64 + 48);
  }
  if (!in_bounds(*cd_offset, *cd_size, size))
    return zip_error(label, "corrupt zip (central directory outside the file)");
  return Error::ok();
}

}  // namespace

Error parse_npz(const uint8_t* data, size_t size, const char* label, std::vector<NpyArray>* arrays) {
  arrays->clear();
  if (size >= sizeof(kNpyMagic) && std::memcmp(data, kNpyMagic, sizeof(kNpyMagic)) == 0) {
    NpyArray array;
    ET_CHECK_OK(parse_npy(data, size, label, &array));
    arrays->push_back(array);
    return Error::ok();
  }
  uint64_t cd_offset = 0, cd_size = 0, entries = 0;
  ET_CHECK_OK(find_central_directory(data, size, label, &cd_offset, &cd_size, &entries));
  if (entries == 0) return zip_error(label, "the archive holds no arrays");

  uint64_t cursor = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t e = 0; e < entries; ++e) {
    if (!in_bounds(cursor, kCentralHeaderSize, cd_end) || read_u32(data + cursor) != kCentralHeaderSig)
      return zip_error(label, "corrupt zip (bad central directory entry)");
    const uint8_t* h = data + cursor;
    uint16_t flags = read_u16(h + 8);
    uint16_t method = read_u16(h + 10);
    uint32_t crc = read_u32(h + 16);
    uint64_t compressed = read_u32(h + 20);
    uint64_t uncompressed = read_u32(h + 24);
    uint16_t name_len = read_u16(h + 28);
    uint16_t extra_len = read_u16(h + 30);
    uint16_t comment_len = read_u16(h + 32);
    uint64_t local = read_u32(h + 42);
    uint64_t record = kCentralHeaderSize + static_cast<uint64_t>(name_len) + extra_len + comment_len;
    if (!in_bounds(cursor, record, cd_end))
      return zip_error(label, "corrupt zip (central directory entry runs past its end)");
    std::string entry = printable(h + kCentralHeaderSize, name_len);

    // ZIP64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in order.
    const uint8_t* extra = h + kCentralHeaderSize + name_len;
    for (uint32_t x = 0; x + 4 <= extra_len;) {
      uint16_t id = read_u16(extra + x);
      uint16_t len = read_u16(extra + x + 2);
      if (x + 4u + len > extra_len) return zip_error(label, "corrupt zip (extra field runs past its end)");
      if (id == kZip64ExtraId) {
        const uint8_t* field = extra + x + 4;
        uint32_t used = 0;
        for (uint64_t* value : {&uncompressed, &compressed, &local}) {
          if (*value != 0xFFFFFFFFu) continue;
          if (used + 8 > len) return zip_error(label, "corrupt zip (short ZIP64 extra field)");
          *value = read_u64(field + used);
          used += 8;
        }
      }
      x += 4u + len;
    }

    if (flags & 0x1)
      return Error::make(ErrorCode::InvalidArgument, "%s: entry '%s' is encrypted", label, entry.c_str());
    if (method == 8)
      return Error::make(ErrorCode::NotSupported,
                         "%s: compressed npz is not supported, use np.savez (entry '%s' is deflated; "
                         "np.savez_compressed writes those)",
                         label, entry.c_str());
    if (method != 0)
      return Error::make(ErrorCode::NotSupported,
                         "%s: entry '%s' uses zip compression method %u; only stored entries (np.savez) are supported",
                         label, entry.c_str(), static_cast<unsigned>(method));
    if (compressed != uncompressed)
      return Error::make(ErrorCode::InvalidArgument, "%s: corrupt zip (stored entry '%s' has two sizes)", label,
                         entry.c_str());
    if (entry.size() < 4 || entry.compare(entry.size() - 4, 4, ".npy") != 0)
      return Error::make(ErrorCode::InvalidArgument, "%s: entry '%s' is not an .npy array", label, entry.c_str());

    if (!in_bounds(local, kLocalHeaderSize, size) || read_u32(data + local) != kLocalHeaderSig)
      return Error::make(ErrorCode::InvalidArgument, "%s: corrupt zip (bad local header for '%s')", label,
                         entry.c_str());
    uint64_t start = local + kLocalHeaderSize + read_u16(data + local + 26) + read_u16(data + local + 28);
    if (!in_bounds(start, compressed, size))
      return Error::make(ErrorCode::InvalidArgument, "%s: corrupt zip (entry '%s' runs past the end of the file)",
                         label, entry.c_str());
    const uint8_t* bytes = data + start;
    if (crc32(bytes, static_cast<size_t>(compressed)) != crc)
      return Error::make(ErrorCode::InvalidArgument, "%s: corrupt zip (CRC mismatch in entry '%s')", label,
                         entry.c_str());

    std::string key = entry.substr(0, entry.size() - 4);
    std::string where = std::string(label) + ":" + key;
    NpyArray array;
    ET_CHECK_OK(parse_npy(bytes, static_cast<size_t>(compressed), where.c_str(), &array));
    array.name = key;
    arrays->push_back(array);
    cursor += record;
  }
  return Error::ok();
}

Error read_npz(const char* path, NpzFile* out) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) return Error::make(ErrorCode::Io, "cannot open %s: %s", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::make(ErrorCode::Io, "%s is not a regular file", path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  std::free(out->bytes);
  out->bytes = static_cast<uint8_t*>(std::malloc(size == 0 ? 1 : size));
  out->size = size;
  if (out->bytes == nullptr) {
    ::close(fd);
    return Error::make(ErrorCode::OutOfMemory, "%s: cannot allocate %zu bytes to read it", path, size);
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, out->bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      ::close(fd);
      return Error::make(ErrorCode::Io, "cannot read %s: %s", path,
                         n == 0 ? "it became shorter while being read" : std::strerror(saved));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return parse_npz(out->bytes, size, path, &out->arrays);
}

void sort_for_inputs(std::vector<NpyArray>* arrays) {
  auto positional = [](const std::string& key, uint64_t* index) {
    if (key.size() < 5 || key.size() > 12 || key.compare(0, 4, "arr_") != 0) return false;
    uint64_t v = 0;
    for (size_t i = 4; i < key.size(); ++i) {
      if (key[i] < '0' || key[i] > '9') return false;
      v = v * 10 + static_cast<uint64_t>(key[i] - '0');
    }
    *index = v;
    return true;
  };
  bool all_positional = true;
  uint64_t ignored = 0;
  for (const NpyArray& a : *arrays) all_positional = all_positional && positional(a.name, &ignored);
  std::stable_sort(arrays->begin(), arrays->end(), [&](const NpyArray& a, const NpyArray& b) {
    if (all_positional) {
      uint64_t ia = 0, ib = 0;
      positional(a.name, &ia);
      positional(b.name, &ib);
      return ia < ib;
    }
    return a.name < b.name;
  });
}

}  // namespace tools
}  // namespace etmlir
