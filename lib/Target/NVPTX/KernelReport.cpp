//===- KernelReport.cpp - what a PTX kernel uses --------------------------===//

#include "mla/Target/NVPTX/KernelReport.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Target/SM90KernelPlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <vector>

using namespace mla;
using namespace mla::nvptx;

namespace {
llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// The instruction kinds the report counts, in its order: each counts the
/// opcodes that start with its prefix (the first that matches).
constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> kKinds[] = {
    {"mma.sync", "mma.sync"},
    {"wgmma", "wgmma.mma_async"},
    {"ldmatrix", "ldmatrix"},
    {"cp.async.bulk", "cp.async.bulk"},
    {"cp.async", "cp.async"},
    {"mbarrier", "mbarrier"},
    {"barrier", "bar."},
    {"barrier", "barrier."},
    {"ld.global", "ld.global"},
    {"st.global", "st.global"},
    {"ld.shared", "ld.shared"},
    {"st.shared", "st.shared"},
    {"local", "ld.local"},
    {"local", "st.local"},
    {"cvt", "cvt"},
    {"ex2", "ex2"},
    {"shfl", "shfl"}};

/// One `.entry` of a PTX text.
struct Entry {
  std::string name;
  int64_t parameters = 0;
  /// Its directives: `.maxntid` / `.reqntid` (x, y, z), `.minnctapersm`.
  std::string threadsDirective;
  std::array<int64_t, 3> threads = {0, 0, 0};
  int64_t minBlocksPerSM = 0;
  int64_t instructions = 0;
  std::map<llvm::StringRef, int64_t> kinds;
};

struct Module {
  std::string version, target;
  std::vector<Entry> entries;
};

/// The opcode of a body line (its predicate guard dropped), or "" for a
/// declaration, label, brace or comment.
llvm::StringRef opcodeOf(llvm::StringRef line) {
  line = line.trim();
  if (line.empty() || line.starts_with("//") || line.starts_with(".") ||
      line.starts_with("$") || line.starts_with("{") || line.starts_with("}"))
    return "";
  if (line.starts_with("@"))
    line = line.drop_until([](char c) { return c == ' ' || c == '\t'; }).trim();
  return line.take_until(
      [](char c) { return c == ' ' || c == '\t' || c == ';'; });
}

void countInstruction(Entry &entry, llvm::StringRef opcode) {
  ++entry.instructions;
  for (const auto &[kind, prefix] : kKinds)
    if (opcode.starts_with(prefix)) {
      ++entry.kinds[kind];
      return;
    }
}

/// `.maxntid 256, 1, 1` → {256, 1, 1}.
std::array<int64_t, 3> parseTriple(llvm::StringRef values) {
  std::array<int64_t, 3> v = {1, 1, 1};
  llvm::SmallVector<llvm::StringRef, 3> parts;
  values.split(parts, ',');
  for (size_t i = 0; i < parts.size() && i < 3; ++i)
    if (parts[i].trim().getAsInteger(10, v[i]))
      v[i] = 0;
  return v;
}

Module parsePTX(llvm::StringRef ptx) {
  Module module;
  enum { Outside, Params, Directives, Body } state = Outside;
  int depth = 0;
  llvm::SmallVector<llvm::StringRef> lines;
  ptx.split(lines, '\n');
  for (llvm::StringRef raw : lines) {
    llvm::StringRef line = raw.trim();
    switch (state) {
    case Outside:
      if (line.consume_front(".version "))
        module.version = line.trim().str();
      else if (line.consume_front(".target "))
        module.target =
            line.take_until([](char c) { return c == ','; }).trim().str();
      else if (line.consume_front(".visible .entry ") ||
               line.consume_front(".entry ")) {
        module.entries.emplace_back();
        module.entries.back().name =
            line.take_until([](char c) { return c == '('; }).trim().str();
        state = line.contains(')') ? Directives : Params;
      }
      break;
    case Params:
      if (line.starts_with(".param"))
        ++module.entries.back().parameters;
      if (line.starts_with(")"))
        state = Directives;
      break;
    case Directives: {
      Entry &entry = module.entries.back();
      if (line.starts_with("{")) {
        state = Body;
        depth = 1;
      } else if (line.consume_front(".maxntid") ||
                 line.consume_front(".reqntid")) {
        entry.threadsDirective =
            raw.trim().starts_with(".maxntid") ? ".maxntid" : ".reqntid";
        entry.threads = parseTriple(line);
      } else if (line.consume_front(".minnctapersm")) {
        if (line.trim().getAsInteger(10, entry.minBlocksPerSM))
          entry.minBlocksPerSM = 0;
      }
      break;
    }
    case Body:
      depth += llvm::count(line, '{') - llvm::count(line, '}');
      if (depth <= 0) {
        state = Outside;
        break;
      }
      if (llvm::StringRef opcode = opcodeOf(line); !opcode.empty())
        countInstruction(module.entries.back(), opcode);
      break;
    }
  }
  return module;
}

/// The number that ends right before `suffix` in `line`, if `suffix` is
/// there ("Used 128 registers" with " registers": 128).
std::optional<int64_t> numberBefore(llvm::StringRef line,
                                    llvm::StringRef suffix) {
  size_t at = line.find(suffix);
  if (at == llvm::StringRef::npos)
    return std::nullopt;
  size_t begin = at;
  while (begin > 0 && llvm::isDigit(line[begin - 1]))
    --begin;
  int64_t value = 0;
  if (begin == at || line.slice(begin, at).getAsInteger(10, value))
    return std::nullopt;
  return value;
}

/// What `ptxas -v` prints before each number it reports.
constexpr std::pair<llvm::StringLiteral, int64_t PtxasKernelInfo::*>
    kPtxasFields[] = {
        {" bytes stack frame", &PtxasKernelInfo::stackBytes},
        {" bytes spill stores", &PtxasKernelInfo::spillStoreBytes},
        {" bytes spill loads", &PtxasKernelInfo::spillLoadBytes},
        {" registers", &PtxasKernelInfo::registers},
        {" barriers", &PtxasKernelInfo::barriers},
        {" bytes smem", &PtxasKernelInfo::sharedBytes}};

/// The entry a `ptxas info` line names between quotes or after "for ".
std::optional<std::string> ptxasEntryName(llvm::StringRef line) {
  if (line.contains("Compiling entry function '")) {
    llvm::StringRef rest = line.split("Compiling entry function '").second;
    return rest.take_until([](char c) { return c == '\''; }).str();
  }
  if (line.contains("Function properties for "))
    return line.split("Function properties for ").second.trim().str();
  return std::nullopt;
}

/// The ptxas to run: $MLA_PTXAS (set but empty: none), else ptxas on PATH
/// or in /usr/local/cuda/bin.
llvm::Expected<std::optional<std::string>> findPtxas() {
  if (const char *env = std::getenv("MLA_PTXAS")) {
    if (!*env)
      return std::nullopt;
    if (!llvm::sys::fs::can_execute(env))
      return error(llvm::Twine("MLA_PTXAS=") + env + " is not an executable");
    return std::string(env);
  }
  if (auto path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  if (auto path =
          llvm::sys::findProgramByName("ptxas", {"/usr/local/cuda/bin"}))
    return *path;
  return std::nullopt;
}

/// A temporary file that removes itself.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

/// `ptxas -arch=<target> -v` on the PTX: its report, or why it failed.
llvm::Expected<std::map<std::string, PtxasKernelInfo>>
runPtxas(llvm::StringRef ptxas, llvm::StringRef ptx, llvm::StringRef target) {
  TempFile input, output, log;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "mla-report", "ptx", fd, input.path))
    return error("cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  if (llvm::sys::fs::createTemporaryFile("mla-report", "cubin", output.path) ||
      llvm::sys::fs::createTemporaryFile("mla-report", "log", log.path))
    return error("cannot create a temporary file");
  std::string arch = ("-arch=" + target).str();
  llvm::SmallVector<llvm::StringRef> args = {
      ptxas, arch, "-v", input.path.str(), "-o", output.path.str()};
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(log.path), llvm::StringRef(log.path)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects,
                                         /*SecondsToWait=*/300,
                                         /*MemoryLimit=*/0, &message);
  auto text = llvm::MemoryBuffer::getFile(log.path);
  std::string said = text ? (*text)->getBuffer().trim().str() : "";
  if (status != 0)
    return error("ptxas (" + ptxas + ") rejected the PTX" +
                 (message.empty() ? "" : ": " + message) +
                 (said.empty() ? "" : ":\n" + said));
  return parsePtxasVerbose(said);
}

void printEntry(const Entry &entry, const Module &module,
                const std::map<std::string, int64_t> &dynamicShared,
                const std::map<std::string, PtxasKernelInfo> *ptxas,
                llvm::raw_ostream &os) {
  os << "kernel " << entry.name << "\n";
  os << "  target " << module.target << "  ptx " << module.version
     << "  parameters " << entry.parameters << "\n";
  int64_t threads = entry.threads[0] * entry.threads[1] * entry.threads[2];
  os << "  threads_per_block ";
  if (threads > 0)
    os << threads << " (" << entry.threadsDirective << ")";
  else
    os << "not declared";
  if (entry.minBlocksPerSM > 0)
    os << "  min_blocks_per_sm " << entry.minBlocksPerSM << " (.minnctapersm)";
  os << "\n";
  auto dynamic = dynamicShared.find(entry.name);
  std::optional<PtxasKernelInfo> info;
  if (ptxas)
    if (auto it = ptxas->find(entry.name); it != ptxas->end())
      info = it->second;
  os << "  shared_bytes dynamic ";
  if (dynamic != dynamicShared.end())
    os << dynamic->second << " (the launch's)";
  else
    os << "set at launch";
  if (info)
    os << "  static " << info->sharedBytes;
  os << "\n";
  if (!ptxas)
    os << "  registers unknown (no ptxas: set MLA_PTXAS or put ptxas on "
          "PATH)\n";
  else if (!info)
    os << "  registers unknown (ptxas did not report this entry)\n";
  else
    os << "  registers " << info->registers << "  stack_bytes "
       << info->stackBytes << "  spills store " << info->spillStoreBytes
       << " load " << info->spillLoadBytes << "  barriers " << info->barriers
       << " (ptxas -v)\n";
  // What a block takes of an SM of this architecture.
  const ArchInfo *arch = lookupArch(module.target);
  if (arch && arch->registersPerCU > 0 && threads > 0) {
    int64_t warps = (threads + arch->waveSize - 1) / arch->waveSize;
    llvm::SmallVector<std::string, 3> limits = {
        std::to_string(arch->simdsPerCU * arch->maxWavesPerSIMD / warps) +
        " (by warps)"};
    if (info) {
      int64_t perThread = (std::max<int64_t>(info->registers, 1) + 7) / 8 * 8;
      limits.push_back(std::to_string(arch->registersPerCU /
                                      (warps * arch->waveSize * perThread)) +
                       " (by registers)");
    }
    if (dynamic != dynamicShared.end()) {
      int64_t shared = dynamic->second + (info ? info->sharedBytes : 0) +
                       SM90KernelPlan::kReservedSharedPerBlock;
      limits.push_back(std::to_string(arch->ldsBytesPerCU / shared) +
                       " (by shared memory)");
    }
    os << "  occupancy_blocks_per_sm ";
    llvm::interleave(limits, os, ", ");
    os << "\n";
  }
  os << "  instructions total=" << entry.instructions;
  llvm::StringRef last;
  for (const auto &kind : kKinds) {
    if (kind.first == last)
      continue;
    last = kind.first;
    auto it = entry.kinds.find(kind.first);
    if (it != entry.kinds.end())
      os << " " << kind.first << "=" << it->second;
  }
  os << "\n";
}
} // namespace

std::map<std::string, PtxasKernelInfo>
mla::nvptx::parsePtxasVerbose(llvm::StringRef text) {
  std::map<std::string, PtxasKernelInfo> kernels;
  PtxasKernelInfo *current = nullptr;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (auto name = ptxasEntryName(line)) {
      current = &kernels[*name];
      continue;
    }
    if (!current)
      continue;
    for (const auto &[suffix, field] : kPtxasFields)
      if (auto value = numberBefore(line, suffix))
        current->*field = *value;
  }
  return kernels;
}

llvm::Error mla::nvptx::printKernelReport(
    llvm::StringRef ptx, llvm::raw_ostream &os,
    const std::map<std::string, int64_t> &dynamicShared) {
  Module module = parsePTX(ptx);
  if (module.entries.empty())
    return error("the PTX has no .entry");
  if (module.target.empty())
    return error("the PTX has no .target");
  auto ptxas = findPtxas();
  if (!ptxas)
    return ptxas.takeError();
  std::optional<std::map<std::string, PtxasKernelInfo>> facts;
  if (*ptxas) {
    auto ran = runPtxas(**ptxas, ptx, module.target);
    if (!ran)
      return ran.takeError();
    facts = std::move(*ran);
  }
  for (const Entry &entry : module.entries)
    printEntry(entry, module, dynamicShared, facts ? &*facts : nullptr, os);
  return llvm::Error::success();
}
