//===- Artifact.cpp - the artifact container and its manifest -------------===//

#include "mla/Runtime/Artifact.h"
#include "mla/Runtime/Status.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mla;

char StatusError::ID = 0;

Status mla::takeStatus(llvm::Error err, std::string &message) {
  Status status = Status::Success;
  message.clear();
  llvm::handleAllErrors(
      std::move(err),
      [&](const StatusError &e) {
        if (status == Status::Success)
          status = e.status;
        message += (message.empty() ? "" : "; ") + e.message;
      },
      [&](const llvm::ErrorInfoBase &e) {
        if (status == Status::Success)
          status = Status::Internal;
        message += (message.empty() ? "" : "; ") + e.message();
      });
  return status;
}

namespace {
constexpr llvm::StringLiteral kManifestName = "manifest.json";
constexpr llvm::StringLiteral kHsacoName = "kernels.hsaco";
constexpr llvm::StringLiteral kEmuName = "kernels.emu.mlir";
constexpr llvm::StringLiteral kCpuName = "decode.cpu.mlir";
constexpr size_t kBlock = 512;

llvm::Error invalid(const llvm::Twine &msg) {
  return statusError(Status::InvalidArtifact, "invalid artifact: " + msg);
}

//===----------------------------------------------------------------------===//
// POSIX ustar: 512-byte headers, octal fields, data padded to 512 bytes,
// two zero blocks at the end.
//===----------------------------------------------------------------------===//

void writeOctal(char *field, size_t width, uint64_t value) {
  // width - 1 digits and a NUL.
  std::snprintf(field, width, "%0*llo", (int)(width - 1),
                (unsigned long long)value);
}

uint64_t headerChecksum(const uint8_t *header) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : header[i];
  return sum;
}

void appendMember(std::string &archive, llvm::StringRef name,
                  llvm::StringRef data) {
  uint8_t header[kBlock] = {};
  char *h = reinterpret_cast<char *>(header);
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 99));
  writeOctal(h + 100, 8, 0644);
  writeOctal(h + 108, 8, 0);
  writeOctal(h + 116, 8, 0);
  writeOctal(h + 124, 12, data.size());
  writeOctal(h + 136, 12, 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::snprintf(h + 148, 8, "%06llo", (unsigned long long)headerChecksum(header));
  h[155] = ' ';
  archive.append(h, kBlock);
  archive.append(data.data(), data.size());
  archive.append((kBlock - data.size() % kBlock) % kBlock, '\0');
}

llvm::Expected<uint64_t> parseOctal(const uint8_t *field, size_t width,
                                    llvm::StringRef what) {
  uint64_t value = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ')
    ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  if (!any || (i < width && field[i] != '\0' && field[i] != ' '))
    return invalid("malformed tar header (" + what + ")");
  return value;
}

struct Member {
  std::string name;
  llvm::StringRef data;
};

llvm::Expected<std::vector<Member>> readMembers(llvm::StringRef bytes) {
  std::vector<Member> members;
  size_t pos = 0;
  const auto *base = reinterpret_cast<const uint8_t *>(bytes.data());
  for (;;) {
    if (pos + kBlock > bytes.size())
      return invalid("truncated (the tar archive ends without its end "
                     "marker)");
    const uint8_t *header = base + pos;
    if (std::all_of(header, header + kBlock, [](uint8_t c) { return c == 0; })) {
      // The end-of-archive marker is two zero blocks; a cut one means the
      // file was cut.
      if (pos + 2 * kBlock > bytes.size() ||
          !std::all_of(header, header + 2 * kBlock,
                       [](uint8_t c) { return c == 0; }))
        return invalid("truncated (the tar end-of-archive marker is cut)");
      return members;
    }
    if (std::memcmp(header + 257, "ustar", 5) != 0)
      return invalid(pos == 0 ? "not a tar archive" :
                     "malformed tar header at byte " + llvm::Twine(pos));
    auto checksum = parseOctal(header + 148, 8, "checksum");
    if (!checksum)
      return checksum.takeError();
    if (*checksum != headerChecksum(header))
      return invalid("tar header checksum mismatch at byte " +
                     llvm::Twine(pos));
    auto size = parseOctal(header + 124, 12, "size");
    if (!size)
      return size.takeError();
    Member member;
    member.name = std::string(reinterpret_cast<const char *>(header),
                              strnlen(reinterpret_cast<const char *>(header), 100));
    char type = header[156];
    pos += kBlock;
    if (*size > bytes.size() - pos)
      return invalid("truncated (member '" + member.name + "' needs " +
                     llvm::Twine(*size) + " bytes, " +
                     llvm::Twine(bytes.size() - pos) + " left)");
    if (type == '0' || type == '\0') {
      member.data = bytes.substr(pos, *size);
      members.push_back(std::move(member));
    }
    pos += (*size + kBlock - 1) / kBlock * kBlock;
  }
}

uint32_t crc(llvm::StringRef data) {
  return llvm::crc32(llvm::arrayRefFromStringRef(data));
}

//===----------------------------------------------------------------------===//
// The manifest
//===----------------------------------------------------------------------===//

llvm::json::Value kernelToJSON(const ArtifactKernel &kernel) {
  llvm::json::Array args;
  for (const ArtifactKernelArg &arg : kernel.args) {
    llvm::json::Array fields;
    for (auto [offset, size] : arg.fields)
      fields.push_back(llvm::json::Array{offset, size});
    args.push_back(llvm::json::Object{
        {"name", arg.name},
        {"dims", llvm::json::Array(arg.dims)},
        {"kernarg_fields", std::move(fields)}});
  }
  llvm::json::Object object{
      {"name", kernel.name},
      {"grid", llvm::json::Array(kernel.grid)},
      {"block", llvm::json::Array(kernel.block)},
      {"lds_bytes", kernel.ldsBytes},
      {"kernarg_bytes", kernel.kernargBytes},
      {"args", std::move(args)}};
  if (kernel.rowsPerWorkgroup > 0) {
    object["rows_per_workgroup"] = kernel.rowsPerWorkgroup;
    object["heads_per_block"] = kernel.headsPerBlock;
  }
  return object;
}

/// Reads manifest fields with one error path: the first missing or
/// mistyped field names itself.
struct ManifestReader {
  llvm::Error err = llvm::Error::success();
  ~ManifestReader() { llvm::consumeError(std::move(err)); }

  void fail(const llvm::Twine &path, const char *what) {
    if (!err)
      err = invalid("manifest field '" + path + "' " + what);
  }
  const llvm::json::Object *object(const llvm::json::Object *parent,
                                   llvm::StringRef key, const llvm::Twine &path) {
    const llvm::json::Object *o = parent ? parent->getObject(key) : nullptr;
    if (!o)
      fail(path, "is missing or not an object");
    return o;
  }
  const llvm::json::Array *array(const llvm::json::Object *parent,
                                 llvm::StringRef key, const llvm::Twine &path) {
    const llvm::json::Array *a = parent ? parent->getArray(key) : nullptr;
    if (!a)
      fail(path, "is missing or not an array");
    return a;
  }
  int64_t integer(const llvm::json::Object *parent, llvm::StringRef key,
                  const llvm::Twine &path) {
    std::optional<int64_t> v = parent ? parent->getInteger(key) : std::nullopt;
    if (!v)
      fail(path, "is missing or not an integer");
    return v.value_or(0);
  }
  int64_t integer(const llvm::json::Value &value, const llvm::Twine &path) {
    std::optional<int64_t> v = value.getAsInteger();
    if (!v)
      fail(path, "is not an integer");
    return v.value_or(0);
  }
  std::string string(const llvm::json::Object *parent, llvm::StringRef key,
                     const llvm::Twine &path) {
    std::optional<llvm::StringRef> v =
        parent ? parent->getString(key) : std::nullopt;
    if (!v)
      fail(path, "is missing or not a string");
    return v.value_or("").str();
  }
  std::string string(const llvm::json::Value &value, const llvm::Twine &path) {
    std::optional<llvm::StringRef> v = value.getAsString();
    if (!v)
      fail(path, "is not a string");
    return v.value_or("").str();
  }
  double number(const llvm::json::Object *parent, llvm::StringRef key,
                const llvm::Twine &path) {
    std::optional<double> v = parent ? parent->getNumber(key) : std::nullopt;
    if (!v)
      fail(path, "is missing or not a number");
    return v.value_or(0.0);
  }
  bool failed() { return bool(err); }
  llvm::Error take() { return std::move(err); }
};

void readKernel(ManifestReader &r, const llvm::json::Object *o,
                const std::string &path, ArtifactKernel &kernel) {
  kernel.name = r.string(o, "name", path + ".name");
  const llvm::json::Array *grid = r.array(o, "grid", path + ".grid");
  const llvm::json::Array *block = r.array(o, "block", path + ".block");
  if (grid && grid->size() != 3)
    r.fail(path + ".grid", "must have 3 entries");
  if (block && block->size() != 3)
    r.fail(path + ".block", "must have 3 entries");
  if (r.failed())
    return;
  for (int i = 0; i < 3; ++i) {
    kernel.grid[i] = r.string((*grid)[i], path + ".grid");
    kernel.block[i] = r.integer((*block)[i], path + ".block");
  }
  kernel.ldsBytes = r.integer(o, "lds_bytes", path + ".lds_bytes");
  kernel.kernargBytes = r.integer(o, "kernarg_bytes", path + ".kernarg_bytes");
  if (o->get("rows_per_workgroup")) {
    kernel.rowsPerWorkgroup =
        r.integer(o, "rows_per_workgroup", path + ".rows_per_workgroup");
    kernel.headsPerBlock =
        r.integer(o, "heads_per_block", path + ".heads_per_block");
    if (!r.failed() &&
        (kernel.rowsPerWorkgroup <= 0 || kernel.headsPerBlock <= 0))
      r.fail(path + ".rows_per_workgroup",
             "and heads_per_block must be positive");
  }
  const llvm::json::Array *args = r.array(o, "args", path + ".args");
  if (!args)
    return;
  for (size_t i = 0; i < args->size(); ++i) {
    std::string argPath = path + ".args[" + std::to_string(i) + "]";
    const llvm::json::Object *a = (*args)[i].getAsObject();
    if (!a) {
      r.fail(argPath, "is not an object");
      return;
    }
    ArtifactKernelArg arg;
    arg.name = r.string(a, "name", argPath + ".name");
    if (const llvm::json::Array *dims = r.array(a, "dims", argPath + ".dims"))
      for (const llvm::json::Value &d : *dims)
        arg.dims.push_back(r.string(d, argPath + ".dims"));
    if (const llvm::json::Array *fields =
            r.array(a, "kernarg_fields", argPath + ".kernarg_fields"))
      for (const llvm::json::Value &f : *fields) {
        const llvm::json::Array *pair = f.getAsArray();
        if (!pair || pair->size() != 2) {
          r.fail(argPath + ".kernarg_fields", "must hold [offset, size] pairs");
          return;
        }
        arg.fields.push_back({r.integer((*pair)[0], argPath + ".kernarg_fields"),
                              r.integer((*pair)[1], argPath + ".kernarg_fields")});
      }
    kernel.args.push_back(std::move(arg));
  }
}
} // namespace

std::string mla::serializeArtifact(const Artifact &a) {
  llvm::json::Array kernels;
  for (const ArtifactKernel &kernel : a.kernels)
    kernels.push_back(kernelToJSON(kernel));
  llvm::json::Array files;
  auto addFile = [&](llvm::StringRef name, const std::string &data) {
    if (!data.empty())
      files.push_back(llvm::json::Object{{"name", name},
                                         {"bytes", (int64_t)data.size()},
                                         {"crc32", (int64_t)crc(data)}});
  };
  addFile(kHsacoName, a.hsaco);
  addFile(kEmuName, a.emuModule);
  addFile(kCpuName, a.cpuModule);
  llvm::json::Object manifest{
      {"format", "mla-decode-artifact"},
      {"version", a.version},
      {"target", llvm::json::Object{{"chip", a.chip},
                                    {"triple", a.triple},
                                    {"compute_units", a.computeUnits}}},
      {"decode", llvm::json::Object{{"kv_format", formatName(a.format)},
                                    {"num_heads", a.numHeads},
                                    {"qk_dim", a.qkDim},
                                    {"v_dim", a.vDim},
                                    {"sm_scale", a.smScale},
                                    {"max_query_tokens", kMaxQueryTokens}}},
      {"config", a.config},
      {"planner", llvm::json::Object{{"forced_splits", a.forcedSplits}}},
      {"cpu", llvm::json::Object{{"pipeline", a.cpuPipeline},
                                 {"kv_tile", a.cpuKVTile}}},
      {"kernels", std::move(kernels)},
      {"files", std::move(files)}};
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";

  std::string archive;
  appendMember(archive, kManifestName, json);
  if (!a.hsaco.empty())
    appendMember(archive, kHsacoName, a.hsaco);
  if (!a.emuModule.empty())
    appendMember(archive, kEmuName, a.emuModule);
  if (!a.cpuModule.empty())
    appendMember(archive, kCpuName, a.cpuModule);
  archive.append(2 * kBlock, '\0');
  return archive;
}

llvm::Expected<Artifact> mla::parseArtifact(llvm::StringRef bytes) {
  auto members = readMembers(bytes);
  if (!members)
    return members.takeError();
  if (members->empty() || (*members)[0].name != kManifestName)
    return invalid("the first member must be " + kManifestName);
  auto json = llvm::json::parse((*members)[0].data);
  if (!json)
    return invalid("manifest.json: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root || root->getString("format") != "mla-decode-artifact")
    return invalid("manifest.json is not an mla-decode-artifact manifest");
  std::optional<int64_t> version = root->getInteger("version");
  if (!version)
    return invalid("manifest field 'version' is missing");
  if (*version != kArtifactVersion)
    return statusError(Status::VersionMismatch,
                       "artifact format version " + llvm::Twine(*version) +
                           "; this runtime reads version " +
                           llvm::Twine(kArtifactVersion) +
                           " (recompile the artifact with this release)");

  Artifact a;
  ManifestReader r;
  const llvm::json::Object *target = r.object(root, "target", "target");
  a.chip = r.string(target, "chip", "target.chip");
  a.triple = r.string(target, "triple", "target.triple");
  a.computeUnits = r.integer(target, "compute_units", "target.compute_units");
  const llvm::json::Object *decode = r.object(root, "decode", "decode");
  std::string format = r.string(decode, "kv_format", "decode.kv_format");
  a.numHeads = r.integer(decode, "num_heads", "decode.num_heads");
  a.qkDim = r.integer(decode, "qk_dim", "decode.qk_dim");
  a.vDim = r.integer(decode, "v_dim", "decode.v_dim");
  a.smScale = r.number(decode, "sm_scale", "decode.sm_scale");
  a.config = r.string(root, "config", "config");
  const llvm::json::Object *planner = r.object(root, "planner", "planner");
  a.forcedSplits = r.integer(planner, "forced_splits", "planner.forced_splits");
  const llvm::json::Object *cpu = r.object(root, "cpu", "cpu");
  a.cpuPipeline = r.string(cpu, "pipeline", "cpu.pipeline");
  a.cpuKVTile = r.integer(cpu, "kv_tile", "cpu.kv_tile");
  if (const llvm::json::Array *kernels = r.array(root, "kernels", "kernels"))
    for (size_t i = 0; i < kernels->size() && !r.failed(); ++i) {
      std::string path = "kernels[" + std::to_string(i) + "]";
      const llvm::json::Object *o = (*kernels)[i].getAsObject();
      if (!o) {
        r.fail(path, "is not an object");
        break;
      }
      ArtifactKernel kernel;
      readKernel(r, o, path, kernel);
      a.kernels.push_back(std::move(kernel));
    }
  const llvm::json::Array *files = r.array(root, "files", "files");
  if (r.failed())
    return r.take();

  std::optional<CacheFormat> parsed = parseFormat(format);
  if (!parsed)
    return invalid("unknown kv_format '" + format + "'");
  a.format = *parsed;
  if (a.numHeads <= 0 || a.qkDim <= 0 || a.vDim <= 0 || a.vDim > a.qkDim ||
      a.computeUnits <= 0 || a.forcedSplits < 0 || !(a.smScale >= 0.0))
    return invalid("the manifest's sizes are out of range");
  if (a.cpuPipeline != "decompose" && a.cpuPipeline != "split")
    return invalid("unknown cpu pipeline '" + a.cpuPipeline + "'");

  // Every listed file is present, whole and unchanged; nothing else is.
  for (size_t i = 0; i < files->size(); ++i) {
    const llvm::json::Object *f = (*files)[i].getAsObject();
    std::string path = "files[" + std::to_string(i) + "]";
    std::string name = r.string(f, "name", path + ".name");
    int64_t size = r.integer(f, "bytes", path + ".bytes");
    int64_t sum = r.integer(f, "crc32", path + ".crc32");
    if (r.failed())
      return r.take();
    auto member = llvm::find_if(*members,
                                [&](const Member &m) { return m.name == name; });
    if (member == members->end())
      return invalid("member '" + name + "' is missing");
    if ((int64_t)member->data.size() != size)
      return invalid("member '" + name + "' has " +
                     llvm::Twine(member->data.size()) + " bytes, the manifest "
                     "says " + llvm::Twine(size));
    if ((int64_t)crc(member->data) != sum)
      return invalid("member '" + name + "' is corrupted (CRC-32 mismatch)");
    std::string *slot = name == kHsacoName ? &a.hsaco
                        : name == kEmuName ? &a.emuModule
                        : name == kCpuName ? &a.cpuModule
                                           : nullptr;
    if (!slot)
      return invalid("unknown member '" + name + "'");
    *slot = member->data.str();
  }
  if (members->size() != files->size() + 1)
    return invalid("the archive holds members the manifest does not list");
  if (a.cpuModule.empty())
    return invalid("the reference form (" + kCpuName + ") is missing");
  if ((!a.hsaco.empty() || !a.emuModule.empty()) && a.kernels.size() != 2)
    return invalid("an artifact with kernels describes the partial and the "
                   "combine kernel");
  return a;
}

llvm::Expected<Artifact> mla::readArtifactFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return statusError(Status::IOError, "cannot read artifact '" + path +
                                            "': " + buffer.getError().message());
  auto artifact = parseArtifact((*buffer)->getBuffer());
  if (!artifact) {
    std::string message;
    Status status = takeStatus(artifact.takeError(), message);
    return statusError(status, path + ": " + message);
  }
  return artifact;
}

llvm::Error mla::writeArtifactFile(const Artifact &artifact,
                                   llvm::StringRef path) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return statusError(Status::IOError,
                       "cannot write '" + path + "': " + ec.message());
  os << serializeArtifact(artifact);
  os.close();
  if (os.has_error())
    return statusError(Status::IOError, "cannot write '" + path + "'");
  return llvm::Error::success();
}

llvm::Expected<int64_t> mla::resolveDim(
    llvm::StringRef entry,
    llvm::ArrayRef<std::pair<llvm::StringRef, int64_t>> symbols) {
  auto invalid = [&](const llvm::Twine &why) {
    return statusError(Status::InvalidArtifact,
                       "invalid artifact: size '" + entry + "': " + why);
  };
  auto symbol = [&](llvm::StringRef name) -> std::optional<int64_t> {
    int64_t value;
    if (!name.getAsInteger(10, value))
      return value;
    for (auto [n, v] : symbols)
      if (n == name)
        return v;
    return std::nullopt;
  };
  // A product of factors: a number, a symbol, or roundup(symbol,number).
  int64_t product = 1;
  llvm::SmallVector<llvm::StringRef> factors;
  entry.split(factors, '*');
  for (llvm::StringRef factor : factors) {
    factor = factor.trim();
    std::optional<int64_t> value;
    if (factor.consume_front("roundup(") && factor.consume_back(")")) {
      auto [name, multipleText] = factor.split(',');
      int64_t multiple;
      if (multipleText.trim().getAsInteger(10, multiple) || multiple <= 0 ||
          multiple > INT32_MAX)
        return invalid("roundup needs a positive multiple");
      if ((value = symbol(name.trim())) && *value >= 0 && *value <= INT32_MAX)
        value = (*value + multiple - 1) / multiple * multiple;
    } else {
      value = symbol(factor);
    }
    if (!value)
      return invalid("unknown size symbol '" + factor + "'");
    // Sizes are 32-bit at launch (HIP grids, the C API's counts).
    if (*value < 0 || *value > INT32_MAX ||
        (*value != 0 && product > INT32_MAX / *value))
      return invalid("size out of range");
    product *= *value;
  }
  return product;
}
