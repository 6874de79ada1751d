//===- Problem.cpp - generating, reading and validating decode inputs -----===//

#include "mla/Tools/Problem.h"
#include "mla/Tools/Npy.h"
#include "mla/Runtime/Numerics.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
  if (options.qLen < 0 || options.qLen > 1024)
    return error("--q-len " + llvm::Twine(options.qLen) +
                 " query tokens per sequence; 1..4 are supported");
  // Refuse what would not fit in memory (or in the int32 indptrs) up front
  // rather than dying in an allocation.
  if (options.spareRows < 0 || options.spareRows > (int64_t(1) << 24))
    return error("--spare-rows " + llvm::Twine(options.spareRows) +
                 " outside 0..2^24");
  totalRows += options.spareRows;
  if (totalRows * std::max<int64_t>(options.qkDim, 1) > (int64_t(1) << 33))
    return error("the generated cache would hold " + llvm::Twine(totalRows) +
                 " rows of " + llvm::Twine(options.qkDim) +
                 " elements: more than 2^33 elements");

  DecodeProblem p;
  p.format = options.format;
  p.numHeads = options.numHeads;
  p.qkDim = options.qkDim;
  p.vDim = options.vDim;
  p.qoIndptr.push_back(0);
  p.kvIndptr.push_back(0);
  for (int64_t len : lens) {
    p.qoIndptr.push_back(p.qoIndptr.back() + options.qLen);
    p.kvIndptr.push_back(p.kvIndptr.back() + len);
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

  // The cache is drawn in bf16 first, then quantized, as a serving engine
  // quantizes a bf16 cache.
  int64_t numValues = p.numRows * p.qkDim;
  std::vector<float> values(numValues);
  for (float &v : values)
    v = bf16ToFloat(floatToBF16((float)(0.02 * normal.next())));
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

llvm::Expected<std::vector<int32_t>> readIndptr(const std::string &path) {
  auto array = readNpy(path);
  if (!array)
    return array.takeError();
  if (array->dtype != "i4" || array->shape.size() != 1)
    return error(path + ": indptr must be int32 [B+1], got " + array->dtype +
                 " " + array->shapeString());
  std::vector<int32_t> out(array->numElements());
  std::memcpy(out.data(), array->data.data(), array->data.size());
  return out;
}
} // namespace

llvm::Expected<DecodeProblem> mla::loadProblem(const std::string &dir,
                                               std::optional<CacheFormat> format,
                                               int64_t vDim) {
  DecodeProblem p;
  p.vDim = vDim;

  std::string qPath = join(dir, "q.npy");
  auto q = readNpy(qPath);
  if (!q)
    return q.takeError();
  if (q->shape.size() != 3 || (q->dtype != "f4" && q->dtype != "u2"))
    return error(qPath + ": q must be float32 or uint16 (bf16 bits) [T, H, Dqk], got " +
                 q->dtype + " " + q->shapeString());
  p.numTokens = q->shape[0];
  p.numHeads = q->shape[1];
  p.qkDim = q->shape[2];
  p.q.resize(q->numElements());
  if (q->dtype == "u2") {
    std::memcpy(p.q.data(), q->data.data(), q->data.size());
  } else {
    const float *src = reinterpret_cast<const float *>(q->data.data());
    for (size_t i = 0; i < p.q.size(); ++i) {
      float v;
      std::memcpy(&v, src + i, sizeof v);
      p.q[i] = floatToBF16(v);
    }
  }

  std::string kvPath = join(dir, "kv.npy");
  auto kv = readNpy(kvPath);
  if (!kv)
    return kv.takeError();
  if (kv->shape.size() == 3 && kv->shape[1] == 1)
    kv->shape.erase(kv->shape.begin() + 1);
  if (kv->shape.size() != 2)
    return error(kvPath + ": kv must be [N, width] or [N, 1, width], got " +
                 kv->shapeString());
  p.numRows = kv->shape[0];
  int64_t width = kv->shape[1];
  if (!format) {
    if (kv->dtype == "f4" || kv->dtype == "u2")
      format = CacheFormat::BF16;
    else if (kv->dtype == "u1")
      format = width * 2 == p.qkDim ? CacheFormat::MXFP4 : CacheFormat::FP8;
  }
  if (!format)
    return error(kvPath + ": kv dtype " + kv->dtype +
                 " fits no cache format (float32/uint16 bf16, uint8 fp8 or "
                 "packed mxfp4)");
  p.format = *format;
  const char *fmt = formatName(p.format);
  bool dtypeOk = p.format == CacheFormat::BF16
                     ? (kv->dtype == "f4" || kv->dtype == "u2")
                     : kv->dtype == "u1";
  if (!dtypeOk)
    return error(kvPath + ": a " + fmt + " cache must be " +
                 (p.format == CacheFormat::BF16 ? "float32 or uint16"
                                                : "uint8") +
                 ", got " + kv->dtype);
  int64_t expectedWidth = p.format == CacheFormat::MXFP4 ? p.qkDim / 2 : p.qkDim;
  if (width != expectedWidth)
    return error(kvPath + ": " + fmt + " kv rows must be " +
                 llvm::Twine(expectedWidth) + " wide for Dqk = " +
                 llvm::Twine(p.qkDim) + ", got " + kv->shapeString());
  p.kv.resize(p.numRows * p.rowBytes());
  if (p.format == CacheFormat::BF16 && kv->dtype == "f4") {
    for (int64_t i = 0; i < p.numRows * p.qkDim; ++i) {
      float v;
      std::memcpy(&v, kv->data.data() + 4 * i, sizeof v);
      uint16_t bits = floatToBF16(v);
      p.kv[2 * i] = bits & 0xFF;
      p.kv[2 * i + 1] = bits >> 8;
    }
  } else {
    p.kv = std::move(kv->data);
  }

  std::string scalePath = join(dir, "kv_scale.npy");
  bool haveScale = llvm::sys::fs::exists(scalePath);
  if (p.format == CacheFormat::BF16) {
    if (haveScale)
      return error(scalePath + ": a bf16 cache takes no scale file");
  } else {
    if (!haveScale)
      return error(scalePath + ": missing; a " + llvm::Twine(fmt) +
                   " cache needs its scales");
    auto scale = readNpy(scalePath);
    if (!scale)
      return scale.takeError();
    if (p.format == CacheFormat::FP8) {
      if (scale->dtype != "f4" || scale->numElements() != 1 ||
          scale->shape.size() > 1)
        return error(scalePath + ": fp8 scale must be float32 [1], got " +
                     scale->dtype + " " + scale->shapeString());
      std::memcpy(&p.fp8Scale, scale->data.data(), sizeof(float));
    } else {
      std::vector<int64_t> expected = {p.numRows, p.qkDim / 32};
      if (scale->dtype != "u1" || scale->shape != expected)
        return error(scalePath + ": mxfp4 scales must be uint8 [N, Dqk/32] = [" +
                     llvm::Twine(p.numRows) + ", " + llvm::Twine(p.qkDim / 32) +
                     "], got " + scale->dtype + " " + scale->shapeString());
      p.mxScales = std::move(scale->data);
    }
  }

  auto qo = readIndptr(join(dir, "qo_indptr.npy"));
  if (!qo)
    return qo.takeError();
  auto kvp = readIndptr(join(dir, "kv_indptr.npy"));
  if (!kvp)
    return kvp.takeError();
  p.qoIndptr = std::move(*qo);
  p.kvIndptr = std::move(*kvp);
  if (llvm::Error err = validateProblem(p))
    return std::move(err);
  return p;
}

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
  for (int64_t b = 0; b < p.numSeqs(); ++b) {
    int64_t qLen = (int64_t)p.qoIndptr[b + 1] - p.qoIndptr[b];
    int64_t kvLen = (int64_t)p.kvIndptr[b + 1] - p.kvIndptr[b];
    if (kvLen < 0)
      return error("kv_indptr decreases at sequence " + llvm::Twine(b) + " (" +
                   llvm::Twine(p.kvIndptr[b]) + " -> " +
                   llvm::Twine(p.kvIndptr[b + 1]) + ")");
    if (qLen < 1 || qLen > 4)
      return error("sequence " + llvm::Twine(b) + " has q_len = " +
                   llvm::Twine(qLen) + " query tokens; 1..4 are supported");
  }
  if (p.qoIndptr.back() != p.numTokens)
    return error("qo_indptr ends at " + llvm::Twine(p.qoIndptr.back()) +
                 " but q holds T = " + llvm::Twine(p.numTokens) + " tokens");
  if (p.kvIndptr.back() > p.numRows)
    return error("kv_indptr points past the kv rows: ends at " +
                 llvm::Twine(p.kvIndptr.back()) + ", kv holds N = " +
                 llvm::Twine(p.numRows) + " rows");
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
  const char *kvType = p.format == CacheFormat::BF16 ? "u2" : "u1";
  int64_t kvWidth = p.format == CacheFormat::MXFP4 ? D / 2 : D;
  if (auto err = writeNpy(join(dir, "kv.npy"), kvType, {N, kvWidth},
                          p.kv.data(), p.kv.size()))
    return err;
  if (p.format == CacheFormat::FP8) {
    if (auto err = writeNpy(join(dir, "kv_scale.npy"), "f4", {1}, &p.fp8Scale, 4))
      return err;
  } else if (p.format == CacheFormat::MXFP4) {
    if (auto err = writeNpy(join(dir, "kv_scale.npy"), "u1", {N, D / 32},
                            p.mxScales.data(), p.mxScales.size()))
      return err;
  }
  if (auto err = writeNpy(join(dir, "qo_indptr.npy"), "i4", {B1},
                          p.qoIndptr.data(), B1 * 4))
    return err;
  return writeNpy(join(dir, "kv_indptr.npy"), "i4", {B1}, p.kvIndptr.data(),
                  B1 * 4);
}
