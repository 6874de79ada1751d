//===- Problem.cpp - generating, reading and validating decode inputs -----===//

#include "mla/Tools/Problem.h"
#include "mla/Tools/Npy.h"
#include "mla/Runtime/Numerics.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace mla;

int64_t DecodeProblem::rowBytes() const {
  switch (format) {
  case CacheFormat::BF16:
    return qkDim * 2;
  case CacheFormat::FP8:
    return qkDim;
  case CacheFormat::MXFP4:
    return qkDim / 2;
  }
  return 0;
}

double DecodeProblem::effectiveSmScale() const {
  return smScale > 0.0 ? smScale : 1.0 / std::sqrt((double)qkDim);
}

int64_t DecodeProblem::kvLength(int64_t b) const {
  int64_t entries = (int64_t)kvIndptr[b + 1] - kvIndptr[b];
  if (!paged())
    return entries;
  return entries == 0 ? 0 : (entries - 1) * pageSize + kvLastPageLen[b];
}

int64_t DecodeProblem::kvRow(int64_t b, int64_t pos) const {
  if (!paged())
    return kvIndptr[b] + pos;
  int64_t page = kvIndices[kvIndptr[b] + pos / pageSize];
  return page * pageSize + pos % pageSize;
}

double DecodeProblem::kvValue(int64_t row, int64_t col) const {
  const uint8_t *r = kv.data() + row * rowBytes();
  switch (format) {
  case CacheFormat::BF16:
    return bf16ToFloat(static_cast<uint16_t>(r[2 * col] | (r[2 * col + 1] << 8)));
  case CacheFormat::FP8:
    return decodeE4M3(r[col]) * (double)fp8Scale;
  case CacheFormat::MXFP4: {
    uint8_t byte = r[col / 2];
    uint8_t nibble = (col % 2) ? (byte >> 4) : (byte & 0xF);
    return decodeE2M1(nibble) *
           decodeE8M0(mxScales[row * (qkDim / 32) + col / 32]);
  }
  }
  return 0.0;
}

namespace {
llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// The page sizes of the ABI (docs/abi.md).
constexpr int64_t kMaxPageSize = 256;

llvm::Error checkPageSize(int64_t pageSize) {
  if (pageSize < 1 || pageSize > kMaxPageSize || (pageSize & (pageSize - 1)))
    return error("page size P = " + llvm::Twine(pageSize) +
                 " must be a power of two in 1.." + llvm::Twine(kMaxPageSize));
  return llvm::Error::success();
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string shapeText(const std::vector<int64_t> &shape) {
  NpyArray array;
  array.shape = shape;
  return array.shapeString();
}

/// N(0,1) by Box-Muller over a 64-bit Mersenne Twister: the same numbers on
/// every platform (std::normal_distribution is implementation-defined).
class NormalSource {
public:
  explicit NormalSource(uint64_t seed) : engine(seed) {}
  double next() {
    if (hasSpare) {
      hasSpare = false;
      return spare;
    }
    double u1, u2;
    do {
      u1 = (engine() >> 11) * 0x1.0p-53;
    } while (u1 <= 0.0);
    u2 = (engine() >> 11) * 0x1.0p-53;
    double r = std::sqrt(-2.0 * std::log(u1));
    spare = r * std::sin(2.0 * M_PI * u2);
    hasSpare = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

private:
  std::mt19937_64 engine;
  bool hasSpare = false;
  double spare = 0.0;
};

/// Quantizes the bf16-rounded values into `p.kv` (and the scales), as a
/// serving engine quantizes a bf16 cache.
void encodeCache(DecodeProblem &p, const std::vector<float> &values) {
  int64_t numValues = values.size();
  p.kv.resize(p.numRows * p.rowBytes());
  switch (p.format) {
  case CacheFormat::BF16:
    for (int64_t i = 0; i < numValues; ++i) {
      uint16_t bits = floatToBF16(values[i]);
      p.kv[2 * i] = bits & 0xFF;
      p.kv[2 * i + 1] = bits >> 8;
    }
    break;
  case CacheFormat::FP8: {
    float amax = 0.0f;
    for (float v : values)
      amax = std::max(amax, std::fabs(v));
    p.fp8Scale = fp8ScaleForTensor(amax);
    for (int64_t i = 0; i < numValues; ++i)
      p.kv[i] = encodeE4M3((double)values[i] / p.fp8Scale);
    break;
  }
  case CacheFormat::MXFP4: {
    int64_t blocks = p.qkDim / 32;
    p.mxScales.resize(p.numRows * blocks);
    for (int64_t row = 0; row < p.numRows; ++row) {
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const float *block = &values[row * p.qkDim + blk * 32];
        double amax = 0.0;
        for (int i = 0; i < 32; ++i)
          amax = std::max(amax, (double)std::fabs(block[i]));
        uint8_t scaleCode = mxfp4ScaleForBlock(amax);
        p.mxScales[row * blocks + blk] = scaleCode;
        double scale = decodeE8M0(scaleCode);
        for (int i = 0; i < 32; i += 2) {
          uint8_t lo = encodeE2M1(block[i] / scale);
          uint8_t hi = encodeE2M1(block[i + 1] / scale);
          p.kv[row * p.rowBytes() + (blk * 32 + i) / 2] = lo | (hi << 4);
        }
      }
    }
    break;
  }
  }
}

/// Scales options.outliers random rows and as many random columns of the
/// cache by kOutlierFactor (a stream of their own: the other values stay
/// those of the same seed without outliers).
void addOutliers(std::vector<double> &values, const DecodeProblem &p,
                 const GenerateOptions &options) {
  if (options.outliers <= 0 || p.numRows == 0)
    return;
  std::mt19937_64 engine(options.seed ^ 0x6a09e667f3bcc909ULL);
  for (int64_t i = 0; i < options.outliers; ++i) {
    int64_t row = engine() % p.numRows, col = engine() % p.qkDim;
    for (int64_t c = 0; c < p.qkDim; ++c)
      values[row * p.qkDim + c] *= GenerateOptions::kOutlierFactor;
    for (int64_t r = 0; r < p.numRows; ++r)
      values[r * p.qkDim + col] *= GenerateOptions::kOutlierFactor;
  }
}

/// Pages of a generated paged pool: the batch's, the spare rows rounded up
/// to pages, and a quarter more (at least one), so that the pool is always
/// larger than the batch.
int64_t poolPages(const std::vector<int64_t> &lens, const GenerateOptions &o) {
  int64_t used = 0;
  for (int64_t len : lens)
    used += ceilDiv(len, o.pageSize);
  return used + ceilDiv(o.spareRows, o.pageSize) +
         std::max<int64_t>(1, used / 4);
}

/// A permutation of 0..n-1 drawn from `seed`: Fisher-Yates over mt19937_64,
/// since std::shuffle's order differs between standard libraries.
std::vector<int32_t> shuffledIds(int64_t n, uint64_t seed) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 engine(seed);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(ids[i], ids[engine() % uint64_t(i + 1)]);
  return ids;
}

/// Moves the batch's rows (contiguous in `p`) into the pages of a pool, in
/// a shuffled page order. Every row no sequence owns (past a last page's
/// length, in a spare page) holds NaN codes, so a kernel that ignores the
/// page table or reads past a sequence's end fails the check.
void scatterIntoPages(DecodeProblem &p, const std::vector<int64_t> &lens,
                      const GenerateOptions &o) {
  const int64_t P = o.pageSize, numPages = poolPages(lens, o);
  std::vector<int32_t> rowIndptr = std::move(p.kvIndptr);
  p.pageSize = P;
  p.kvIndptr = {0};
  p.kvLastPageLen.clear();
  for (int64_t len : lens) {
    int64_t pages = ceilDiv(len, P);
    p.kvIndptr.push_back(p.kvIndptr.back() + pages);
    p.kvLastPageLen.push_back(pages ? len - (pages - 1) * P : 0);
  }
  // A stream of its own: the values stay those of the contiguous problem
  // of the same seed, so both give the same answer.
  p.kvIndices = shuffledIds(numPages, o.seed ^ 0x9e3779b97f4a7c15ULL);
  p.kvIndices.resize(p.kvIndptr.back());

  const int64_t rowBytes = p.rowBytes(), blocks = p.qkDim / 32;
  const bool mx = p.format == CacheFormat::MXFP4;
  std::vector<uint8_t> kv(numPages * P * rowBytes, 0xFF);
  std::vector<uint8_t> scales(mx ? numPages * P * blocks : 0, 0xFF);
  for (int64_t b = 0; b < (int64_t)lens.size(); ++b) {
    for (int64_t pos = 0; pos < lens[b]; ++pos) {
      int64_t from = rowIndptr[b] + pos, to = p.kvRow(b, pos);
      std::memcpy(&kv[to * rowBytes], &p.kv[from * rowBytes], rowBytes);
      if (mx)
        std::memcpy(&scales[to * blocks], &p.mxScales[from * blocks], blocks);
    }
  }
  p.kv = std::move(kv);
  p.mxScales = std::move(scales);
  p.numRows = numPages * P;
}
} // namespace

llvm::Expected<DecodeProblem>
mla::generateProblem(const GenerateOptions &options) {
  if (options.kvLens.empty())
    return error("--kv-len needs at least one length");
  int64_t batch = options.batch > 0 ? options.batch : options.kvLens.size();
  std::vector<int64_t> lens;
  if (options.kvLens.size() == 1)
    lens.assign(batch, options.kvLens[0]);
  else if ((int64_t)options.kvLens.size() == batch)
    lens = options.kvLens;
  else
    return error("--kv-len lists " + llvm::Twine(options.kvLens.size()) +
                 " lengths for --batch " + llvm::Twine(batch));
  int64_t totalRows = 0;
  for (int64_t len : lens) {
    if (len < 0 || len > (int64_t(1) << 24))
      return error("kv length " + llvm::Twine(len) + " outside 0..2^24");
    totalRows += len;
  }
  if (batch > (int64_t(1) << 20))
    return error("--batch " + llvm::Twine(batch) + " exceeds 2^20 sequences");
  std::vector<int64_t> qLens = options.qLens;
  if (qLens.empty())
    qLens.assign(batch, options.qLen);
  if ((int64_t)qLens.size() != batch)
    return error("--q-len lists " + llvm::Twine(qLens.size()) +
                 " token counts for " + llvm::Twine(batch) + " sequences");
  for (int64_t n : qLens)
    if (n < 0 || n > 1024)
      return error("--q-len " + llvm::Twine(n) +
                   " query tokens per sequence; 1..4 are supported");
  // Refuse what would not fit in memory (or in the int32 indptrs) up front
  // rather than dying in an allocation.
  if (options.outliers < 0 || options.outliers > 1024)
    return error("--outliers " + llvm::Twine(options.outliers) +
                 " outside 0..1024");
  if (options.spareRows < 0 || options.spareRows > (int64_t(1) << 24))
    return error("--spare-rows " + llvm::Twine(options.spareRows) +
                 " outside 0..2^24");
  if (options.pageSize != 0)
    if (llvm::Error err = checkPageSize(options.pageSize))
      return std::move(err);
  int64_t poolRows = options.pageSize > 0
                         ? poolPages(lens, options) * options.pageSize
                         : totalRows + options.spareRows;
  if (poolRows * std::max<int64_t>(options.qkDim, 1) > (int64_t(1) << 33))
    return error("the generated cache would hold " + llvm::Twine(poolRows) +
                 " rows of " + llvm::Twine(options.qkDim) +
                 " elements: more than 2^33 elements");

  DecodeProblem p;
  p.format = options.format;
  p.numHeads = options.numHeads;
  p.qkDim = options.qkDim;
  p.vDim = options.vDim;
  p.qoIndptr.push_back(0);
  p.kvIndptr.push_back(0);
  for (int64_t b = 0; b < batch; ++b) {
    p.qoIndptr.push_back(p.qoIndptr.back() + qLens[b]);
    p.kvIndptr.push_back(p.kvIndptr.back() + lens[b]);
  }
  p.numTokens = p.qoIndptr.back();
  p.numRows = p.kvIndptr.back();
  // Validate the shape parameters before allocating anything.
  if (llvm::Error err = validateProblem(p))
    return std::move(err);

  NormalSource normal(options.seed);
  p.q.resize(p.numTokens * p.numHeads * p.qkDim);
  for (uint16_t &v : p.q)
    v = floatToBF16((float)(0.02 * options.qScale * normal.next()));

  // The cache is drawn in bf16 first, then quantized.
  std::vector<double> values(p.numRows * p.qkDim);
  for (double &v : values)
    v = 0.02 * normal.next();
  addOutliers(values, p, options);
  std::vector<float> rounded(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    rounded[i] = bf16ToFloat(floatToBF16((float)values[i]));
  encodeCache(p, rounded);

  if (options.pageSize > 0) {
    scatterIntoPages(p, lens, options);
    if (llvm::Error err = validateProblem(p))
      return std::move(err);
    return p;
  }
  // A pool larger than the batch: rows no sequence owns hold NaN codes, so
  // a kernel that reads one cannot pass the check.
  p.numRows += options.spareRows;
  p.kv.resize(p.numRows * p.rowBytes(), 0xFF);
  if (p.format == CacheFormat::MXFP4)
    p.mxScales.resize(p.numRows * (p.qkDim / 32), 0xFF);
  return p;
}

namespace {
std::string join(const std::string &dir, const char *name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

/// A 1-D int32 file: an indptr or a page table array.
llvm::Expected<std::vector<int32_t>>
readInt32s(const std::string &path, const char *what, const char *shape) {
  auto array = readNpy(path);
  if (!array)
    return array.takeError();
  if (array->dtype != "i4" || array->shape.size() != 1)
    return error(path + ": " + what + " must be int32 " + shape + ", got " +
                 array->dtype + " " + array->shapeString());
  std::vector<int32_t> out(array->numElements());
  if (!out.empty()) // an empty page table is valid
    std::memcpy(out.data(), array->data.data(), array->data.size());
  return out;
}

llvm::Error readQ(DecodeProblem &p, const std::string &path) {
  auto q = readNpy(path);
  if (!q)
    return q.takeError();
  if (q->shape.size() != 3 || (q->dtype != "f4" && q->dtype != "u2"))
    return error(path +
                 ": q must be float32 or uint16 (bf16 bits) [T, H, Dqk], got " +
                 q->dtype + " " + q->shapeString());
  p.numTokens = q->shape[0];
  p.numHeads = q->shape[1];
  p.qkDim = q->shape[2];
  p.q.resize(q->numElements());
  if (q->dtype == "u2") {
    std::memcpy(p.q.data(), q->data.data(), q->data.size());
    return llvm::Error::success();
  }
  const float *src = reinterpret_cast<const float *>(q->data.data());
  for (size_t i = 0; i < p.q.size(); ++i) {
    float v;
    std::memcpy(&v, src + i, sizeof v);
    p.q[i] = floatToBF16(v);
  }
  return llvm::Error::success();
}

/// Sets numRows (and, paged, pageSize) from kv.npy's shape and returns the
/// row width: [N, width] or [N, 1, width]; paged [num_pages, P, width].
llvm::Expected<int64_t> readCacheShape(DecodeProblem &p, NpyArray &kv,
                                       const std::string &path, bool paged) {
  if (paged) {
    if (kv.shape.size() != 3)
      return error(path +
                   ": a paged cache (kv_indices.npy is present) must "
                   "be [num_pages, P, width], got " +
                   kv.shapeString());
    if (llvm::Error err = checkPageSize(kv.shape[1]))
      return error(path + ": " + llvm::toString(std::move(err)));
    p.pageSize = kv.shape[1];
    p.numRows = kv.shape[0] * kv.shape[1];
    return kv.shape[2];
  }
  if (kv.shape.size() == 3 && kv.shape[1] == 1)
    kv.shape.erase(kv.shape.begin() + 1);
  if (kv.shape.size() != 2)
    return error(
        path + ": kv must be [N, width] or [N, 1, width], got " +
        kv.shapeString() +
        (kv.shape.size() == 3 ? " (a paged cache needs kv_indices.npy)" : ""));
  p.numRows = kv.shape[0];
  return kv.shape[1];
}

/// kv.npy; the format follows from its dtype and width unless given.
llvm::Error readCache(DecodeProblem &p, const std::string &path,
                      std::optional<CacheFormat> format, bool paged) {
  auto kv = readNpy(path);
  if (!kv)
    return kv.takeError();
  auto widthOr = readCacheShape(p, *kv, path, paged);
  if (!widthOr)
    return widthOr.takeError();
  int64_t width = *widthOr;
  if (!format) {
    if (kv->dtype == "f4" || kv->dtype == "u2")
      format = CacheFormat::BF16;
    else if (kv->dtype == "u1")
      format = width * 2 == p.qkDim ? CacheFormat::MXFP4 : CacheFormat::FP8;
  }
  if (!format)
    return error(path + ": kv dtype " + kv->dtype +
                 " fits no cache format (float32/uint16 bf16, uint8 fp8 or "
                 "packed mxfp4)");
  p.format = *format;
  const char *fmt = formatName(p.format);
  bool dtypeOk = p.format == CacheFormat::BF16
                     ? (kv->dtype == "f4" || kv->dtype == "u2")
                     : kv->dtype == "u1";
  if (!dtypeOk)
    return error(
        path + ": a " + fmt + " cache must be " +
        (p.format == CacheFormat::BF16 ? "float32 or uint16" : "uint8") +
        ", got " + kv->dtype);
  int64_t expectedWidth = p.format == CacheFormat::MXFP4 ? p.qkDim / 2 : p.qkDim;
  if (width != expectedWidth)
    return error(path + ": " + fmt + " kv rows must be " +
                 llvm::Twine(expectedWidth) + " wide for Dqk = " +
                 llvm::Twine(p.qkDim) + ", got " + kv->shapeString());
  if (p.format != CacheFormat::BF16 || kv->dtype != "f4") {
    p.kv = std::move(kv->data);
    return llvm::Error::success();
  }
  p.kv.resize(p.numRows * p.rowBytes());
  for (int64_t i = 0; i < p.numRows * p.qkDim; ++i) {
    float v;
    std::memcpy(&v, kv->data.data() + 4 * i, sizeof v);
    uint16_t bits = floatToBF16(v);
    p.kv[2 * i] = bits & 0xFF;
    p.kv[2 * i + 1] = bits >> 8;
  }
  return llvm::Error::success();
}

/// kv_scale.npy: fp8's one f32; mxfp4's E8M0 bytes, shaped like the cache.
llvm::Error readScales(DecodeProblem &p, const std::string &path) {
  bool haveScale = llvm::sys::fs::exists(path);
  const char *fmt = formatName(p.format);
  if (p.format == CacheFormat::BF16)
    return haveScale ? error(path + ": a bf16 cache takes no scale file")
                     : llvm::Error::success();
  if (!haveScale)
    return error(path + ": missing; a " + llvm::Twine(fmt) +
                 " cache needs its scales");
  auto scale = readNpy(path);
  if (!scale)
    return scale.takeError();
  if (p.format == CacheFormat::FP8) {
    if (scale->dtype != "f4" || scale->numElements() != 1 ||
        scale->shape.size() > 1)
      return error(path + ": fp8 scale must be float32 [1], got " +
                   scale->dtype + " " + scale->shapeString());
    std::memcpy(&p.fp8Scale, scale->data.data(), sizeof(float));
    return llvm::Error::success();
  }
  int64_t blocks = p.qkDim / 32;
  std::vector<int64_t> expected =
      p.paged() ? std::vector<int64_t>{p.numPages(), p.pageSize, blocks}
                : std::vector<int64_t>{p.numRows, blocks};
  if (scale->dtype != "u1" || scale->shape != expected)
    return error(path + ": mxfp4 scales must be uint8 " +
                 (p.paged() ? "[num_pages, P, Dqk/32]" : "[N, Dqk/32]") +
                 " = " + shapeText(expected) + ", got " + scale->dtype + " " +
                 scale->shapeString());
  p.mxScales = std::move(scale->data);
  return llvm::Error::success();
}

/// kv_indices.npy and kv_last_page_len.npy: both or neither.
llvm::Error readPageTable(DecodeProblem &p, const std::string &dir,
                          bool paged) {
  std::string lastPath = join(dir, "kv_last_page_len.npy");
  bool haveLast = llvm::sys::fs::exists(lastPath);
  if (!paged)
    return haveLast ? error(lastPath + ": a contiguous cache (no "
                                       "kv_indices.npy) takes no page table")
                    : llvm::Error::success();
  if (!haveLast)
    return error(lastPath + ": missing; a paged cache (kv_indices.npy is "
                            "present) needs each sequence's last page length");
  auto ids = readInt32s(join(dir, "kv_indices.npy"), "kv_indices", "[nnz]");
  if (!ids)
    return ids.takeError();
  auto last = readInt32s(lastPath, "kv_last_page_len", "[B]");
  if (!last)
    return last.takeError();
  p.kvIndices = std::move(*ids);
  p.kvLastPageLen = std::move(*last);
  return llvm::Error::success();
}
} // namespace

llvm::Expected<DecodeProblem>
mla::loadProblem(const std::string &dir, std::optional<CacheFormat> format,
                 int64_t vDim) {
  DecodeProblem p;
  p.vDim = vDim;
  // A page table makes the cache paged, with a page dimension in kv.npy.
  bool paged = llvm::sys::fs::exists(join(dir, "kv_indices.npy"));
  if (llvm::Error err = readQ(p, join(dir, "q.npy")))
    return std::move(err);
  if (llvm::Error err = readCache(p, join(dir, "kv.npy"), format, paged))
    return std::move(err);
  if (llvm::Error err = readScales(p, join(dir, "kv_scale.npy")))
    return std::move(err);
  auto qo = readInt32s(join(dir, "qo_indptr.npy"), "indptr", "[B+1]");
  if (!qo)
    return qo.takeError();
  auto kvp = readInt32s(join(dir, "kv_indptr.npy"), "indptr", "[B+1]");
  if (!kvp)
    return kvp.takeError();
  p.qoIndptr = std::move(*qo);
  p.kvIndptr = std::move(*kvp);
  if (llvm::Error err = readPageTable(p, dir, paged))
    return std::move(err);
  if (llvm::Error err = validateProblem(p))
    return std::move(err);
  return p;
}

namespace {
/// The pool's shape and one last-page length per sequence.
llvm::Error validatePageGeometry(const DecodeProblem &p) {
  if (llvm::Error err = checkPageSize(p.pageSize))
    return err;
  if (p.numRows % p.pageSize != 0)
    return error("kv holds N = " + llvm::Twine(p.numRows) +
                 " rows: not a whole number of pages of P = " +
                 llvm::Twine(p.pageSize) + " rows");
  if ((int64_t)p.kvLastPageLen.size() != p.numSeqs())
    return error("kv_last_page_len has " + llvm::Twine(p.kvLastPageLen.size()) +
                 " entries for B = " + llvm::Twine(p.numSeqs()) + " sequences");
  return llvm::Error::success();
}

/// A sequence's last page holds 1..P rows; one without pages has none.
llvm::Error validateLastPage(const DecodeProblem &p, int64_t b) {
  int64_t pages = (int64_t)p.kvIndptr[b + 1] - p.kvIndptr[b];
  int64_t last = p.kvLastPageLen[b];
  if (pages == 0 && last != 0)
    return error("sequence " + llvm::Twine(b) +
                 " has no pages but kv_last_page_len = " + llvm::Twine(last) +
                 "; must be 0");
  if (pages > 0 && (last < 1 || last > p.pageSize))
    return error("sequence " + llvm::Twine(b) + " has " + llvm::Twine(pages) +
                 (pages == 1 ? " page" : " pages") +
                 " but kv_last_page_len = " + llvm::Twine(last) +
                 "; must be in 1.." + llvm::Twine(p.pageSize));
  return llvm::Error::success();
}

/// Every entry of kv_indices names a page of the pool, and no page twice:
/// a page belongs to at most one sequence and appears once in it.
llvm::Error validatePageIds(const DecodeProblem &p) {
  int64_t nnz = p.kvIndptr.back();
  if (nnz != (int64_t)p.kvIndices.size())
    return error("kv_indptr[" + llvm::Twine(p.numSeqs()) +
                 "] = " + llvm::Twine(nnz) + " pages but kv_indices holds " +
                 llvm::Twine(p.kvIndices.size()) +
                 " page ids: they must be equal");
  std::vector<int64_t> entryOf(p.numPages(), -1);
  for (int64_t b = 0; b < p.numSeqs(); ++b) {
    for (int64_t j = p.kvIndptr[b]; j < p.kvIndptr[b + 1]; ++j) {
      int64_t id = p.kvIndices[j];
      std::string entry = "kv_indices[" + std::to_string(j) +
                          "] = " + std::to_string(id) + " (sequence " +
                          std::to_string(b) + ")";
      if (id < 0 || id >= p.numPages())
        return error(entry + " is outside the pool of " +
                     llvm::Twine(p.numPages()) + " pages");
      if (entryOf[id] >= 0)
        return error(entry + " repeats kv_indices[" + llvm::Twine(entryOf[id]) +
                     "]: a page may appear at most once");
      entryOf[id] = j;
    }
  }
  return llvm::Error::success();
}
} // namespace

llvm::Error mla::validateProblem(const DecodeProblem &p) {
  if (p.numHeads <= 0 || p.numHeads % 16 != 0 || p.numHeads > 128)
    return error("number of heads H = " + llvm::Twine(p.numHeads) +
                 " must be a multiple of 16 in 16..128");
  if (p.qkDim <= 0 || p.qkDim % 32 != 0)
    return error("q/k head dim Dqk = " + llvm::Twine(p.qkDim) +
                 " must be a positive multiple of 32");
  if (p.vDim <= 0 || p.vDim % 32 != 0 || p.vDim > p.qkDim)
    return error("v head dim Dv = " + llvm::Twine(p.vDim) +
                 " must be a positive multiple of 32, at most Dqk = " +
                 llvm::Twine(p.qkDim));
  if (!std::isfinite(p.smScale) || p.smScale < 0.0)
    return error("sm_scale must be positive and finite");
  if (p.qoIndptr.size() != p.kvIndptr.size())
    return error("qo_indptr has " + llvm::Twine(p.qoIndptr.size()) +
                 " entries but kv_indptr has " + llvm::Twine(p.kvIndptr.size()) +
                 ": both must be [B+1]");
  if (p.qoIndptr.size() < 2)
    return error("indptrs must hold B+1 >= 2 entries, got " +
                 llvm::Twine(p.qoIndptr.size()));
  if (p.qoIndptr[0] != 0)
    return error("qo_indptr[0] = " + llvm::Twine(p.qoIndptr[0]) + ", must be 0");
  if (p.kvIndptr[0] != 0)
    return error("kv_indptr[0] = " + llvm::Twine(p.kvIndptr[0]) + ", must be 0");
  // pageSize != 0, not paged(): a negative page size is an error too.
  if (p.pageSize != 0) {
    if (llvm::Error err = validatePageGeometry(p))
      return err;
  } else if (!p.kvIndices.empty() || !p.kvLastPageLen.empty()) {
    return error("kv_indices and kv_last_page_len describe a paged cache; "
                 "this one is contiguous (page size 0)");
  }
  // As for a contiguous cache, q_len may exceed the kv length: the first
  // tokens then see no position (lse -inf).
  for (int64_t b = 0; b < p.numSeqs(); ++b) {
    int64_t qLen = (int64_t)p.qoIndptr[b + 1] - p.qoIndptr[b];
    int64_t kvEntries = (int64_t)p.kvIndptr[b + 1] - p.kvIndptr[b];
    if (kvEntries < 0)
      return error("kv_indptr decreases at sequence " + llvm::Twine(b) + " (" +
                   llvm::Twine(p.kvIndptr[b]) + " -> " +
                   llvm::Twine(p.kvIndptr[b + 1]) + ")");
    if (qLen < 1 || qLen > 4)
      return error("sequence " + llvm::Twine(b) + " has q_len = " +
                   llvm::Twine(qLen) + " query tokens; 1..4 are supported");
    if (p.paged())
      if (llvm::Error err = validateLastPage(p, b))
        return err;
  }
  if (p.qoIndptr.back() != p.numTokens)
    return error("qo_indptr ends at " + llvm::Twine(p.qoIndptr.back()) +
                 " but q holds T = " + llvm::Twine(p.numTokens) + " tokens");
  if (p.paged()) {
    if (llvm::Error err = validatePageIds(p))
      return err;
  } else if (p.kvIndptr.back() > p.numRows) {
    return error("kv_indptr points past the kv rows: ends at " +
                 llvm::Twine(p.kvIndptr.back()) + ", kv holds N = " +
                 llvm::Twine(p.numRows) + " rows");
  }
  if (p.format == CacheFormat::FP8 && !(p.fp8Scale > 0.0f && std::isfinite(p.fp8Scale)))
    return error("fp8 kv scale must be positive and finite, got " +
                 std::to_string(p.fp8Scale));
  return llvm::Error::success();
}

llvm::Error mla::saveProblem(const DecodeProblem &p, const std::string &dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return error(dir + ": cannot create: " + ec.message());
  int64_t T = p.numTokens, H = p.numHeads, D = p.qkDim, N = p.numRows;
  int64_t B1 = p.qoIndptr.size();
  if (auto err = writeNpy(join(dir, "q.npy"), "u2", {T, H, D}, p.q.data(),
                          p.q.size() * 2))
    return err;
  // Paged caches keep their page dimension: [num_pages, P, ...].
  std::vector<int64_t> rows =
      p.paged() ? std::vector<int64_t>{p.numPages(), p.pageSize}
                : std::vector<int64_t>{N};
  auto withWidth = [&](int64_t width) {
    std::vector<int64_t> shape = rows;
    shape.push_back(width);
    return shape;
  };
  const char *kvType = p.format == CacheFormat::BF16 ? "u2" : "u1";
  int64_t kvWidth = p.format == CacheFormat::MXFP4 ? D / 2 : D;
  if (auto err = writeNpy(join(dir, "kv.npy"), kvType, withWidth(kvWidth),
                          p.kv.data(), p.kv.size()))
    return err;
  if (p.format == CacheFormat::FP8) {
    if (auto err = writeNpy(join(dir, "kv_scale.npy"), "f4", {1}, &p.fp8Scale, 4))
      return err;
  } else if (p.format == CacheFormat::MXFP4) {
    if (auto err = writeNpy(join(dir, "kv_scale.npy"), "u1", withWidth(D / 32),
                            p.mxScales.data(), p.mxScales.size()))
      return err;
  } else {
    // A stale scale file from an earlier save would make the inputs invalid.
    llvm::sys::fs::remove(join(dir, "kv_scale.npy"));
  }
  if (auto err = writeNpy(join(dir, "qo_indptr.npy"), "i4", {B1},
                          p.qoIndptr.data(), B1 * 4))
    return err;
  if (auto err = writeNpy(join(dir, "kv_indptr.npy"), "i4", {B1},
                          p.kvIndptr.data(), B1 * 4))
    return err;
  if (!p.paged()) {
    // A stale page table would make the directory read back as paged.
    llvm::sys::fs::remove(join(dir, "kv_indices.npy"));
    llvm::sys::fs::remove(join(dir, "kv_last_page_len.npy"));
    return llvm::Error::success();
  }
  int64_t nnz = p.kvIndices.size(), B = p.kvLastPageLen.size();
  if (auto err = writeNpy(join(dir, "kv_indices.npy"), "i4", {nnz},
                          p.kvIndices.data(), nnz * 4))
    return err;
  return writeNpy(join(dir, "kv_last_page_len.npy"), "i4", {B},
                  p.kvLastPageLen.data(), B * 4);
}
