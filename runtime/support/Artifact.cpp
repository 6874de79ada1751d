//===- Artifact.cpp - the artifact container and its manifest -------------===//
//
// Plain C++ (the runtime carries no LLVM): the tar container, CRC-32 of the
// members and the manifest through the small JSON reader of Json.h. Every
// byte is untrusted: sizes are checked before they are used.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Artifact.h"

#include "Json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace mla;
using rt::fail;

namespace {
using artifact::kCpuModule;
using artifact::kEmuModule;
using artifact::kHsaco;
using artifact::kPtx;
using artifact::kManifest;
constexpr size_t kBlock = 512;

template <typename... Parts> rt::Error invalid(const Parts &...parts) {
  return fail(Status::InvalidArtifact, "invalid artifact: ", parts...);
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

void appendMember(std::string &archive, std::string_view name,
                  std::string_view data) {
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

rt::Expected<uint64_t> parseOctal(const uint8_t *field, size_t width,
                                  const char *what) {
  uint64_t value = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ')
    ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value >> 60)
      return invalid("malformed tar header (", what, " out of range)");
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  if (!any || (i < width && field[i] != '\0' && field[i] != ' '))
    return invalid("malformed tar header (", what, ")");
  return value;
}

struct Member {
  std::string name;
  std::string_view data;
};

bool allZero(const uint8_t *begin, const uint8_t *end) {
  return std::all_of(begin, end, [](uint8_t c) { return c == 0; });
}

rt::Expected<std::vector<Member>> readMembers(std::string_view bytes) {
  std::vector<Member> members;
  size_t pos = 0;
  const auto *base = reinterpret_cast<const uint8_t *>(bytes.data());
  for (;;) {
    if (pos + kBlock > bytes.size())
      return invalid("truncated (the tar archive ends without its end "
                     "marker)");
    const uint8_t *header = base + pos;
    if (allZero(header, header + kBlock)) {
      // The end-of-archive marker is two zero blocks; a cut one means the
      // file was cut.
      if (pos + 2 * kBlock > bytes.size() ||
          !allZero(header, header + 2 * kBlock))
        return invalid("truncated (the tar end-of-archive marker is cut)");
      return members;
    }
    if (std::memcmp(header + 257, "ustar", 5) != 0) {
      if (pos == 0)
        return invalid("not a tar archive");
      return invalid("malformed tar header at byte ", pos);
    }
    auto checksum = parseOctal(header + 148, 8, "checksum");
    if (!checksum)
      return checksum.takeError();
    if (*checksum != headerChecksum(header))
      return invalid("tar header checksum mismatch at byte ", pos);
    auto size = parseOctal(header + 124, 12, "size");
    if (!size)
      return size.takeError();
    Member member;
    member.name = std::string(reinterpret_cast<const char *>(header),
                              strnlen(reinterpret_cast<const char *>(header), 100));
    char type = header[156];
    pos += kBlock;
    if (*size > bytes.size() - pos)
      return invalid("truncated (member '", member.name, "' needs ", *size,
                     " bytes, ", bytes.size() - pos, " left)");
    if (type == '0' || type == '\0') {
      member.data = bytes.substr(pos, *size);
      members.push_back(std::move(member));
    }
    pos += (*size + kBlock - 1) / kBlock * kBlock;
  }
}

/// CRC-32 (IEEE 802.3, as zlib and `crc32` compute it).
uint32_t crc(std::string_view data) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char byte : data)
    c = table[(c ^ byte) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

//===----------------------------------------------------------------------===//
// The manifest
//===----------------------------------------------------------------------===//

json::Value kernelToJSON(const ArtifactKernel &kernel) {
  json::Array args;
  for (const ArtifactKernelArg &arg : kernel.args) {
    json::Array fields, dims(arg.dims.begin(), arg.dims.end());
    for (auto [offset, size] : arg.fields)
      fields.push_back(json::Array{offset, size});
    args.push_back(json::Object{{"name", arg.name},
                                {"dims", std::move(dims)},
                                {"kernarg_fields", std::move(fields)}});
  }
  json::Object object{
      {"name", kernel.name},
      {"grid", json::Array(kernel.grid.begin(), kernel.grid.end())},
      {"block", json::Array(kernel.block.begin(), kernel.block.end())},
      {"lds_bytes", kernel.ldsBytes},
      {"kernarg_bytes", kernel.kernargBytes},
      {"args", std::move(args)}};
  if (kernel.dynamicLdsBytes > 0)
    object.emplace_back("dynamic_lds_bytes", kernel.dynamicLdsBytes);
  if (kernel.rowsPerWorkgroup > 0) {
    object.emplace_back("rows_per_workgroup", kernel.rowsPerWorkgroup);
    object.emplace_back("heads_per_block", kernel.headsPerBlock);
  }
  if (kernel.waitsForPrevious)
    object.emplace_back("waits_for_previous", true);
  return object;
}

/// Reads manifest fields with one error path: the first missing or
/// mistyped field names itself.
struct ManifestReader {
  rt::Error err = rt::Error::success();

  void fail(const std::string &path, const char *what) {
    if (!err)
      err = invalid("manifest field '", path, "' ", what);
  }
  const json::Value *member(const json::Value *parent, std::string_view key) {
    return parent ? parent->get(key) : nullptr;
  }
  const json::Value *object(const json::Value *parent, std::string_view key,
                            const std::string &path) {
    const json::Value *o = member(parent, key);
    if (!o || !o->getAsObject()) {
      fail(path, "is missing or not an object");
      return nullptr;
    }
    return o;
  }
  const json::Array *array(const json::Value *parent, std::string_view key,
                           const std::string &path) {
    const json::Value *a = member(parent, key);
    if (!a || !a->getAsArray()) {
      fail(path, "is missing or not an array");
      return nullptr;
    }
    return a->getAsArray();
  }
  int64_t integer(const json::Value *value, const std::string &path) {
    std::optional<int64_t> v = value ? value->getAsInteger() : std::nullopt;
    if (!v)
      fail(path, "is missing or not an integer");
    return v.value_or(0);
  }
  int64_t integer(const json::Value *parent, std::string_view key,
                  const std::string &path) {
    return integer(member(parent, key), path);
  }
  std::string string(const json::Value *value, const std::string &path) {
    const std::string *v = value ? value->getAsString() : nullptr;
    if (!v)
      fail(path, "is missing or not a string");
    return v ? *v : std::string();
  }
  std::string string(const json::Value *parent, std::string_view key,
                     const std::string &path) {
    return string(member(parent, key), path);
  }
  double number(const json::Value *parent, std::string_view key,
                const std::string &path) {
    const json::Value *value = member(parent, key);
    std::optional<double> v = value ? value->getAsNumber() : std::nullopt;
    if (!v)
      fail(path, "is missing or not a number");
    return v.value_or(0.0);
  }
  bool boolean(const json::Value *parent, std::string_view key,
               const std::string &path) {
    const json::Value *value = member(parent, key);
    std::optional<bool> v = value ? value->getAsBoolean() : std::nullopt;
    if (!v)
      fail(path, "is missing or not true or false");
    return v.value_or(false);
  }
  bool failed() const { return bool(err); }
  rt::Error take() { return std::move(err); }
};

void readKernel(ManifestReader &r, const json::Value *o,
                const std::string &path, ArtifactKernel &kernel) {
  kernel.name = r.string(o, "name", path + ".name");
  const json::Array *grid = r.array(o, "grid", path + ".grid");
  const json::Array *block = r.array(o, "block", path + ".block");
  if (grid && grid->size() != 3)
    r.fail(path + ".grid", "must have 3 entries");
  if (block && block->size() != 3)
    r.fail(path + ".block", "must have 3 entries");
  if (r.failed())
    return;
  for (int i = 0; i < 3; ++i) {
    kernel.grid[i] = r.string(&(*grid)[i], path + ".grid");
    kernel.block[i] = r.integer(&(*block)[i], path + ".block");
  }
  kernel.ldsBytes = r.integer(o, "lds_bytes", path + ".lds_bytes");
  kernel.kernargBytes = r.integer(o, "kernarg_bytes", path + ".kernarg_bytes");
  if (o->get("dynamic_lds_bytes"))
    kernel.dynamicLdsBytes =
        r.integer(o, "dynamic_lds_bytes", path + ".dynamic_lds_bytes");
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
  if (o->get("waits_for_previous"))
    kernel.waitsForPrevious =
        r.boolean(o, "waits_for_previous", path + ".waits_for_previous");
  const json::Array *args = r.array(o, "args", path + ".args");
  if (!args)
    return;
  for (size_t i = 0; i < args->size(); ++i) {
    std::string argPath = path + ".args[" + std::to_string(i) + "]";
    const json::Value *a = &(*args)[i];
    if (!a->getAsObject()) {
      r.fail(argPath, "is not an object");
      return;
    }
    ArtifactKernelArg arg;
    arg.name = r.string(a, "name", argPath + ".name");
    if (const json::Array *dims = r.array(a, "dims", argPath + ".dims"))
      for (const json::Value &d : *dims)
        arg.dims.push_back(r.string(&d, argPath + ".dims"));
    if (const json::Array *fields =
            r.array(a, "kernarg_fields", argPath + ".kernarg_fields"))
      for (const json::Value &f : *fields) {
        const json::Array *pair = f.getAsArray();
        if (!pair || pair->size() != 2) {
          r.fail(argPath + ".kernarg_fields", "must hold [offset, size] pairs");
          return;
        }
        arg.fields.push_back({r.integer(&(*pair)[0], argPath + ".kernarg_fields"),
                              r.integer(&(*pair)[1], argPath + ".kernarg_fields")});
      }
    kernel.args.push_back(std::move(arg));
  }
}
/// A kernel description a backend can launch as it is: the expected kernel
/// in its place, sane launch sizes, size expressions that resolve, only
/// known arguments, each with one kernarg field per descriptor word inside
/// the kernarg segment. A manifest with valid CRCs may still lie; this is
/// where it is caught, before any launch.
rt::Error checkKernel(const ArtifactKernel &k, size_t index) {
  std::string where = "kernels[" + std::to_string(index) + "] (" + k.name + ")";
  const std::string_view order[] = {kernel::kPartial, kernel::kCombine,
                                    kernel::kPlan};
  if (index > 2 || k.name != order[index])
    return invalid(where, ": expected kernel ",
                   index > 2 ? std::string_view("none") : order[index]);
  int64_t threads = 1;
  for (int64_t b : k.block) {
    if (b <= 0 || b > limits::kMaxWorkgroupSize)
      return invalid(where, ": block size out of range");
    threads *= b;
  }
  if (threads > limits::kMaxWorkgroupSize || k.ldsBytes < 0 ||
      k.ldsBytes > limits::kMaxLdsBytes || k.dynamicLdsBytes < 0 ||
      k.dynamicLdsBytes > k.ldsBytes || k.kernargBytes < 0 ||
      k.kernargBytes > limits::kMaxKernargBytes)
    return invalid(where, ": launch sizes out of range");
  // Every size expression resolves when the symbols have values.
  const std::vector<std::pair<std::string_view, int64_t>> symbols = {
      {dim::kTokens, 1}, {dim::kKVRows, 1}, {dim::kSeqsPlusOne, 2},
      {dim::kSequences, 1}, {dim::kWorkItems, 1}, {dim::kKVIndices, 1},
      {dim::kWorkUnits, 1}, {dim::kCombineSlices, 1}};
  for (const std::string &g : k.grid)
    if (auto size = resolveDim(g, symbols); !size)
      return size.takeError().context(where + ": grid: ");
  const std::string_view known[] = {
      arg::kQ,          arg::kKV,         arg::kKVScale,    arg::kQoIndptr,
      arg::kKVIndptr,   arg::kWorkItems,  arg::kItemIndptr, arg::kOut,
      arg::kLse,        arg::kPartialOut, arg::kPartialLse, arg::kKVIndices,
      arg::kKVLastPageLen, arg::kWorkUnits,  arg::kWorkgroupUnits,
      arg::kPlanStatus};
  for (const ArtifactKernelArg &arg : k.args) {
    if (std::find(std::begin(known), std::end(known), arg.name) ==
        std::end(known))
      return invalid(where, ": unknown kernel argument '", arg.name, "'");
    if (arg.dims.empty() || arg.dims.size() > 8)
      return invalid(where, ": argument ", arg.name, " has ", arg.dims.size(),
                     " dims");
    for (const std::string &d : arg.dims)
      if (auto size = resolveDim(d, symbols); !size)
        return size.takeError().context(where + ": " + arg.name + ": ");
    if (k.kernargBytes == 0 && arg.fields.empty())
      continue; // no code object: nothing is packed
    if (arg.fields.size() != 3 + 2 * arg.dims.size())
      return invalid(where, ": argument ", arg.name, " has ",
                     arg.fields.size(), " kernarg fields for ",
                     3 + 2 * arg.dims.size(), " descriptor words");
    for (auto [offset, size] : arg.fields)
      if (offset < 0 || (size != 4 && size != 8) ||
          offset > k.kernargBytes - size)
        return invalid(where, ": a kernarg field of ", arg.name,
                       " lies outside the ", k.kernargBytes,
                       "-byte kernarg segment");
  }
  return rt::Error::success();
}
} // namespace

std::string mla::serializeArtifact(const Artifact &a) {
  json::Array kernels;
  for (const ArtifactKernel &kernel : a.kernels)
    kernels.push_back(kernelToJSON(kernel));
  json::Array files;
  auto addFile = [&](std::string_view name, const std::string &data) {
    if (!data.empty())
      files.push_back(json::Object{{"name", name},
                                   {"bytes", (int64_t)data.size()},
                                   {"crc32", (int64_t)crc(data)}});
  };
  addFile(kHsaco, a.hsaco);
  addFile(kPtx, a.ptx);
  addFile(kEmuModule, a.emuModule);
  addFile(kCpuModule, a.cpuModule);
  json::Object manifest{
      {"format", artifact::kFormatName},
      {"version", a.version},
      {"target", json::Object{{"chip", a.chip},
                              {"triple", a.triple},
                              {"compute_units", a.computeUnits},
                              {"xcds", a.xcds}}},
      {"decode", json::Object{{"kv_format", formatName(a.format)},
                              {"num_heads", a.numHeads},
                              {"qk_dim", a.qkDim},
                              {"v_dim", a.vDim},
                              {"sm_scale", a.smScale},
                              {"page_size", a.pageSize},
                              {"max_query_tokens", kMaxQueryTokens}}},
      {"config", a.config},
      {"planner", json::Object{{"forced_splits", a.forcedSplits}}},
      {"cpu", json::Object{{"pipeline", a.cpuPipeline},
                           {"kv_tile", a.cpuKVTile}}},
      {"kernels", std::move(kernels)},
      {"files", std::move(files)}};

  std::string archive;
  appendMember(archive, kManifest, json::print(manifest));
  if (!a.hsaco.empty())
    appendMember(archive, kHsaco, a.hsaco);
  if (!a.ptx.empty())
    appendMember(archive, kPtx, a.ptx);
  if (!a.emuModule.empty())
    appendMember(archive, kEmuModule, a.emuModule);
  if (!a.cpuModule.empty())
    appendMember(archive, kCpuModule, a.cpuModule);
  archive.append(2 * kBlock, '\0');
  return archive;
}

rt::Expected<Artifact> mla::parseArtifact(std::string_view bytes) {
  auto members = readMembers(bytes);
  if (!members)
    return members.takeError();
  if (members->empty() || (*members)[0].name != kManifest)
    return invalid("the first member must be ", kManifest);
  auto parsed = json::parse((*members)[0].data);
  if (!parsed)
    return invalid("manifest.json: ", parsed.takeError().message());
  const json::Value *root = &*parsed;
  const json::Value *format = root->get("format");
  if (!root->getAsObject() || !format || !format->getAsString() ||
      *format->getAsString() != artifact::kFormatName)
    return invalid("manifest.json is not an mla-decode-artifact manifest");
  const json::Value *versionField = root->get("version");
  std::optional<int64_t> version =
      versionField ? versionField->getAsInteger() : std::nullopt;
  if (!version)
    return invalid("manifest field 'version' is missing");
  if (*version != kArtifactVersion)
    return fail(Status::VersionMismatch, "artifact format version ", *version,
                "; this runtime reads version ", kArtifactVersion,
                " (recompile the artifact with this release)");

  Artifact a;
  ManifestReader r;
  const json::Value *target = r.object(root, "target", "target");
  a.chip = r.string(target, "chip", "target.chip");
  a.triple = r.string(target, "triple", "target.triple");
  a.computeUnits = r.integer(target, "compute_units", "target.compute_units");
  a.xcds = r.integer(target, "xcds", "target.xcds");
  const json::Value *decode = r.object(root, "decode", "decode");
  std::string kvFormat = r.string(decode, "kv_format", "decode.kv_format");
  a.numHeads = r.integer(decode, "num_heads", "decode.num_heads");
  a.qkDim = r.integer(decode, "qk_dim", "decode.qk_dim");
  a.vDim = r.integer(decode, "v_dim", "decode.v_dim");
  a.smScale = r.number(decode, "sm_scale", "decode.sm_scale");
  // Absent in artifacts from before paged caches: contiguous.
  if (decode && decode->get("page_size"))
    a.pageSize = r.integer(decode, "page_size", "decode.page_size");
  a.config = r.string(root, "config", "config");
  const json::Value *planner = r.object(root, "planner", "planner");
  a.forcedSplits = r.integer(planner, "forced_splits", "planner.forced_splits");
  const json::Value *cpu = r.object(root, "cpu", "cpu");
  a.cpuPipeline = r.string(cpu, "pipeline", "cpu.pipeline");
  a.cpuKVTile = r.integer(cpu, "kv_tile", "cpu.kv_tile");
  if (const json::Array *kernels = r.array(root, "kernels", "kernels"))
    for (size_t i = 0; i < kernels->size() && !r.failed(); ++i) {
      std::string path = "kernels[" + std::to_string(i) + "]";
      const json::Value *o = &(*kernels)[i];
      if (!o->getAsObject()) {
        r.fail(path, "is not an object");
        break;
      }
      ArtifactKernel kernel;
      readKernel(r, o, path, kernel);
      a.kernels.push_back(std::move(kernel));
    }
  const json::Array *files = r.array(root, "files", "files");
  if (r.failed())
    return r.take();

  std::optional<CacheFormat> parsedFormat = parseFormat(kvFormat);
  if (!parsedFormat)
    return invalid("unknown kv_format '", kvFormat, "'");
  a.format = *parsedFormat;
  if (a.numHeads <= 0 || a.numHeads > limits::kMaxHeads || a.qkDim <= 0 ||
      a.qkDim > limits::kMaxHeadDim || a.vDim <= 0 || a.vDim > a.qkDim ||
      a.computeUnits <= 0 || a.computeUnits > limits::kMaxComputeUnits ||
      a.xcds <= 0 || a.xcds > a.computeUnits ||
      a.forcedSplits < 0 || a.forcedSplits > kMaxSplitsPerSeq ||
      !(a.smScale >= 0.0) || !std::isfinite(a.smScale) || a.pageSize < 0 ||
      a.pageSize > 256 || (a.pageSize & (a.pageSize - 1)) != 0)
    return invalid("the manifest's sizes are out of range");
  for (size_t i = 0; i < a.kernels.size(); ++i)
    if (rt::Error err = checkKernel(a.kernels[i], i))
      return err;
  // A paged artifact's partial kernel reads the page table; a contiguous
  // one's does not.
  if (!a.kernels.empty()) {
    const auto &args = a.kernels[0].args;
    bool readsTable =
        std::any_of(args.begin(), args.end(), [](const ArtifactKernelArg &g) {
          return g.name == arg::kKVIndices;
        });
    if (readsTable != (a.pageSize > 0))
      return invalid("decode.page_size ", a.pageSize, " but the kernel ",
                     readsTable ? "reads" : "takes no", " page table");
  }
  if (a.cpuPipeline != "decompose" && a.cpuPipeline != "split")
    return invalid("unknown cpu pipeline '", a.cpuPipeline, "'");

  // Every listed file is present, whole and unchanged; nothing else is.
  for (size_t i = 0; i < files->size(); ++i) {
    const json::Value *f = &(*files)[i];
    std::string path = "files[" + std::to_string(i) + "]";
    std::string name = r.string(f, "name", path + ".name");
    int64_t size = r.integer(f, "bytes", path + ".bytes");
    int64_t sum = r.integer(f, "crc32", path + ".crc32");
    if (r.failed())
      return r.take();
    auto member = std::find_if(members->begin(), members->end(),
                               [&](const Member &m) { return m.name == name; });
    if (member == members->end())
      return invalid("member '", name, "' is missing");
    if ((int64_t)member->data.size() != size)
      return invalid("member '", name, "' has ", member->data.size(),
                     " bytes, the manifest says ", size);
    if ((int64_t)crc(member->data) != sum)
      return invalid("member '", name, "' is corrupted (CRC-32 mismatch)");
    std::string *slot = name == kHsaco       ? &a.hsaco
                        : name == kPtx       ? &a.ptx
                        : name == kEmuModule ? &a.emuModule
                        : name == kCpuModule ? &a.cpuModule
                                             : nullptr;
    if (!slot)
      return invalid("unknown member '", name, "'");
    if (!slot->empty())
      return invalid("member '", name, "' is listed twice");
    *slot = std::string(member->data);
  }
  if (members->size() != files->size() + 1)
    return invalid("the archive holds members the manifest does not list");
  if (a.cpuModule.empty())
    return invalid("the reference form (", kCpuModule, ") is missing");
  if ((!a.hsaco.empty() || !a.ptx.empty() || !a.emuModule.empty()) &&
      a.kernels.size() != 3)
    return invalid("an artifact with kernels describes the partial, the "
                   "combine and the plan kernel");
  if (!a.kernels.empty() &&
      (!persistentWorkgroups(a) || *persistentWorkgroups(a) % a.xcds != 0))
    return invalid("the partial kernel's grid is not a fixed workgroup count "
                   "in 1..", limits::kMaxComputeUnits, ", a multiple of the ",
                   a.xcds, " XCDs");
  if (!a.kernels.empty() && !kernelKVTile(a))
    return invalid("the config '", a.config,
                   "' names no kv_tile that is a power of two up to ",
                   limits::kMaxKVTile);
  return a;
}

std::optional<int64_t> mla::persistentWorkgroups(const Artifact &a) {
  if (a.kernels.empty())
    return std::nullopt;
  auto count = resolveDim(a.kernels[0].grid[0], {});
  if (!count || *count < 1 || *count > limits::kMaxComputeUnits)
    return std::nullopt;
  return *count;
}

std::optional<int64_t> mla::kernelKVTile(const Artifact &a) {
  // The config as the compiler prints it: #mla.config<kv_tile = 64, ...>.
  constexpr std::string_view key = "kv_tile = ";
  size_t at = a.config.find(key);
  if (a.kernels.empty() || at == std::string::npos)
    return std::nullopt;
  const char *first = a.config.data() + at + key.size();
  int64_t tile = 0;
  auto [end, ec] =
      std::from_chars(first, a.config.data() + a.config.size(), tile);
  if (ec != std::errc() || tile <= 0 || tile > limits::kMaxKVTile ||
      (tile & (tile - 1)) != 0)
    return std::nullopt;
  return tile;
}

rt::Expected<Artifact> mla::readArtifactFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail(Status::IOError, "cannot read artifact '", path,
                "': ", std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (in.bad())
    return fail(Status::IOError, "cannot read artifact '", path, "'");
  auto artifact = parseArtifact(bytes);
  if (!artifact)
    return artifact.takeError().context(path + ": ");
  return artifact;
}

rt::Error mla::writeArtifactFile(const Artifact &artifact,
                                 const std::string &path) {
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (!os)
    return fail(Status::IOError, "cannot write '", path,
                "': ", std::strerror(errno));
  std::string bytes = serializeArtifact(artifact);
  os.write(bytes.data(), bytes.size());
  os.close();
  if (!os)
    return fail(Status::IOError, "cannot write '", path, "'");
  return rt::Error::success();
}

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parseDecimal(std::string_view s) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    return std::nullopt;
  return value;
}
} // namespace

rt::Expected<int64_t> mla::resolveDim(
    std::string_view entry,
    const std::vector<std::pair<std::string_view, int64_t>> &symbols) {
  auto bad = [&](const char *why) {
    return fail(Status::InvalidArtifact, "invalid artifact: size '", entry,
                "': ", why);
  };
  auto symbol = [&](std::string_view name) -> std::optional<int64_t> {
    if (std::optional<int64_t> value = parseDecimal(name))
      return value;
    for (auto [n, v] : symbols)
      if (n == name)
        return v;
    return std::nullopt;
  };
  // A product of factors: a number, a symbol, or roundup(symbol,number).
  int64_t product = 1;
  std::string_view rest = entry;
  for (;;) {
    size_t star = rest.find('*');
    std::string_view factor = trim(rest.substr(0, star));
    std::optional<int64_t> value;
    constexpr std::string_view kRoundup = "roundup(";
    if (factor.substr(0, kRoundup.size()) == kRoundup && !factor.empty() &&
        factor.back() == ')') {
      std::string_view inner =
          factor.substr(kRoundup.size(), factor.size() - kRoundup.size() - 1);
      size_t comma = inner.find(',');
      std::optional<int64_t> multiple =
          comma == std::string_view::npos
              ? std::nullopt
              : parseDecimal(trim(inner.substr(comma + 1)));
      if (!multiple || *multiple <= 0 || *multiple > INT32_MAX)
        return bad("roundup needs a positive multiple");
      if ((value = symbol(trim(inner.substr(0, comma)))) && *value >= 0 &&
          *value <= INT32_MAX)
        value = (*value + *multiple - 1) / *multiple * *multiple;
    } else {
      value = symbol(factor);
    }
    if (!value)
      return fail(Status::InvalidArtifact, "invalid artifact: size '", entry,
                  "': unknown size symbol '", factor, "'");
    // Sizes are 32-bit at launch (HIP grids, the C API's counts).
    if (*value < 0 || *value > INT32_MAX ||
        (*value != 0 && product > INT32_MAX / *value))
      return bad("size out of range");
    product *= *value;
    if (star == std::string_view::npos)
      return product;
    rest = rest.substr(star + 1);
  }
}
