//===- LoopProfile.cpp - static profile of a kernel's main loop -----------===//
//
// The cost model follows the CDNA4 ISA's pass counts (1 pass = 4 clocks):
// 16x16x128 f8f6f4 takes 8 passes with an fp8 operand and 4 with fp4 x fp4
// (32x32x64: 16 / 8); bf16 and other 16x16 MFMAs 4, 32x32 ones 8. VALU ops
// take 4 clocks (wave64 on a 16-lane SIMD), transcendental ones 16; one
// instruction issues per clock; the CU's LDS moves 128 bytes per clock.
//
//===----------------------------------------------------------------------===//

#include "mla/Target/AMDGPU/LoopProfile.h"

#include "mla/Target/KnownTargets.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <set>
#include <vector>

using namespace mla;
using namespace mla::amdgpu;

namespace {
constexpr int64_t kLanes = 64;

std::optional<uint64_t> branchTarget(const DecodedInst &inst) {
  llvm::StringRef m = inst.mnemonic;
  if (m != "s_branch" && !m.starts_with("s_cbranch"))
    return std::nullopt;
  auto offset = static_cast<int16_t>(inst.firstWord & 0xffff);
  return inst.address + 4 + 4 * static_cast<int64_t>(offset);
}

bool endsFlow(llvm::StringRef m) {
  return m == "s_branch" || m == "s_endpgm" || m == "s_setpc_b64";
}

/// Bytes one lane moves in an LDS access.
int64_t ldsBytes(llvm::StringRef m) {
  if (m.starts_with("ds_read2") || m.starts_with("ds_write2"))
    return m.contains("b64") ? 16 : 8;
  if (m.starts_with("ds_read_b64_tr") || m.contains("_b64"))
    return 8;
  for (auto [key, bytes] : {std::pair<llvm::StringRef, int64_t>{"b128", 16},
                            {"b96", 12}, {"b32", 4}, {"u16", 2}, {"i16", 2},
                            {"b16", 2}, {"u8", 1}, {"i8", 1}, {"b8", 1}})
    if (m.contains(key))
      return bytes;
  return 4;
}

/// Bytes one lane loads in a global/buffer access.
int64_t vmemBytes(llvm::StringRef m) {
  for (auto [key, bytes] : {std::pair<llvm::StringRef, int64_t>{"dwordx4", 16},
                            {"dwordx3", 12}, {"dwordx2", 8}, {"dword", 4},
                            {"ushort", 2}, {"short", 2}, {"ubyte", 1},
                            {"byte", 1}})
    if (m.contains(key))
      return bytes;
  return 4;
}

double mfmaClocks(const DecodedInst &inst) {
  llvm::SmallVector<llvm::StringRef> shape;
  llvm::Regex("([0-9]+)x([0-9]+)x([0-9]+)").match(inst.mnemonic, &shape);
  int64_t m = shape.size() == 4 ? std::stoll(shape[1].str()) : 16;
  int passes = m == 16 ? 4 : 8;
  if (llvm::StringRef(inst.mnemonic).contains("f8f6f4")) {
    // cbsz/blgp 0 and 1 are fp8 / bf8; an fp8 operand doubles the passes.
    auto format = [&](llvm::StringRef key) {
      llvm::SmallVector<llvm::StringRef> field;
      if (!llvm::Regex(key.str() + ":([0-9]+)").match(inst.operands, &field))
        return 0;
      return std::stoi(field[1].str()) & 7;
    };
    bool anyFp8 = format("cbsz") <= 1 || format("blgp") <= 1;
    passes = (m == 16 ? 4 : 8) * (anyFp8 ? 2 : 1);
  }
  return 4.0 * passes;
}

/// Adds one instruction to the profile.
void account(const DecodedInst &inst, LoopProfile &p) {
  llvm::StringRef m = inst.mnemonic;
  auto &c = p.counts;
  ++c["total"];
  if (m.starts_with("v_mfma") || m.starts_with("v_smfmac")) {
    ++c["mfma"];
    p.mfmaClocks += mfmaClocks(inst);
  } else if (m.starts_with("ds_")) {
    bool read = m.starts_with("ds_read") || m.starts_with("ds_load");
    bool write = m.starts_with("ds_write") || m.starts_with("ds_store");
    if (read || write) {
      ++c[read ? "lds_read" : "lds_write"];
      p.ldsClocks += std::max<double>(2.0, ldsBytes(m) * kLanes / 128.0);
    } else {
      ++c["lds_xbar"];
      p.ldsClocks += 2;
    }
  } else if (m.starts_with("global_load_lds") ||
             (m.starts_with("buffer_load") && inst.operands.find(" lds") !=
                                                  std::string::npos)) {
    ++c["lds_dma"];
    p.dmaBytes += vmemBytes(m) * kLanes;
  } else if (m.starts_with("global_") || m.starts_with("buffer_") ||
             m.starts_with("scratch_")) {
    ++c[m.contains("load") ? "global_load" : "global_store"];
  } else if (m.starts_with("s_waitcnt")) {
    ++c["s_waitcnt"];
  } else if (m.starts_with("s_barrier")) {
    ++c["s_barrier"];
  } else if (m.starts_with("s_nop")) {
    ++c["s_nop"];
  } else if (m.starts_with("v_")) {
    ++c["valu"];
    if (m.starts_with("v_cvt"))
      ++c["valu_cvt"];
    for (llvm::StringRef t : {"v_exp_", "v_log_", "v_rcp_", "v_rsq_",
                              "v_sqrt_", "v_sin_", "v_cos_"})
      if (m.starts_with(t))
        ++c["valu_trans"];
  } else if (m.starts_with("s_")) {
    ++c["salu"];
  }
}
} // namespace

std::optional<LoopProfile>
mla::amdgpu::profileMainLoop(llvm::ArrayRef<DecodedInst> insts) {
  if (insts.empty())
    return std::nullopt;
  // Basic blocks: leaders are the entry, branch targets and fall-throughs.
  std::map<uint64_t, size_t> indexOf;
  for (size_t i = 0; i < insts.size(); ++i)
    indexOf[insts[i].address] = i;
  std::set<size_t> leaders = {0};
  for (size_t i = 0; i < insts.size(); ++i) {
    auto target = branchTarget(insts[i]);
    if (!target && !endsFlow(insts[i].mnemonic))
      continue;
    if (target && indexOf.count(*target))
      leaders.insert(indexOf[*target]);
    if (i + 1 < insts.size())
      leaders.insert(i + 1);
  }
  std::vector<size_t> starts(leaders.begin(), leaders.end());
  size_t n = starts.size();
  auto blockEnd = [&](size_t b) {
    return b + 1 < n ? starts[b + 1] : insts.size();
  };
  std::map<size_t, size_t> blockOf;
  for (size_t b = 0; b < n; ++b)
    blockOf[starts[b]] = b;
  std::vector<std::vector<size_t>> succ(n), pred(n);
  for (size_t b = 0; b < n; ++b) {
    const DecodedInst &last = insts[blockEnd(b) - 1];
    auto target = branchTarget(last);
    if (target && indexOf.count(*target))
      succ[b].push_back(blockOf[indexOf[*target]]);
    if (!endsFlow(last.mnemonic) && b + 1 < n)
      succ[b].push_back(b + 1);
    for (size_t s : succ[b])
      pred[s].push_back(b);
  }
  // Dominators by iteration over the blocks reachable from the entry.
  std::vector<bool> reach(n, false);
  std::vector<size_t> stack = {0};
  while (!stack.empty()) {
    size_t u = stack.back();
    stack.pop_back();
    if (reach[u])
      continue;
    reach[u] = true;
    for (size_t s : succ[u])
      stack.push_back(s);
  }
  std::vector<std::set<size_t>> dom(n);
  std::set<size_t> all;
  for (size_t u = 0; u < n; ++u)
    if (reach[u])
      all.insert(u);
  for (size_t u : all)
    dom[u] = u == 0 ? std::set<size_t>{0} : all;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t u : all) {
      if (u == 0)
        continue;
      std::set<size_t> d;
      bool first = true;
      for (size_t p : pred[u]) {
        if (!reach[p])
          continue;
        if (first) {
          d = dom[p];
          first = false;
        } else {
          std::set<size_t> both;
          std::set_intersection(d.begin(), d.end(), dom[p].begin(),
                                dom[p].end(), std::inserter(both, both.end()));
          d = std::move(both);
        }
      }
      d.insert(u);
      if (d != dom[u]) {
        dom[u] = std::move(d);
        changed = true;
      }
    }
  }
  // Natural loops: a back edge u -> h (h dominates u) and what reaches u
  // without passing h.
  std::map<size_t, std::set<size_t>> loops;
  for (size_t u : all)
    for (size_t h : succ[u]) {
      if (!dom[u].count(h))
        continue;
      std::set<size_t> &body = loops[h];
      body.insert(h);
      std::vector<size_t> work = {u};
      while (!work.empty()) {
        size_t x = work.back();
        work.pop_back();
        if (body.insert(x).second)
          for (size_t p : pred[x])
            work.push_back(p);
      }
    }
  auto mfmas = [&](const std::set<size_t> &body) {
    int64_t count = 0;
    for (size_t b : body)
      for (size_t i = starts[b]; i < blockEnd(b); ++i)
        count += llvm::StringRef(insts[i].mnemonic).starts_with("v_mfma");
    return count;
  };
  // Innermost loops with MFMAs: no other such loop nested inside.
  const std::set<size_t> *best = nullptr;
  size_t bestHeader = 0;
  int64_t bestMfmas = 0;
  for (auto &[h, body] : loops) {
    int64_t count = mfmas(body);
    if (!count)
      continue;
    bool hasInner = llvm::any_of(loops, [&](auto &other) {
      return other.first != h && mfmas(other.second) &&
             other.second.size() < body.size() &&
             std::includes(body.begin(), body.end(), other.second.begin(),
                           other.second.end());
    });
    if (!hasInner && count > bestMfmas) {
      best = &body;
      bestHeader = h;
      bestMfmas = count;
    }
  }
  if (!best)
    return std::nullopt;
  LoopProfile profile;
  profile.header = insts[starts[bestHeader]].address;
  for (size_t b : *best)
    for (size_t i = starts[b]; i < blockEnd(b); ++i)
      account(insts[i], profile);
  return profile;
}

namespace {
constexpr const char *kCountKeys[] = {
    "total",  "mfma",  "lds_read", "lds_write",  "lds_xbar",
    "lds_dma", "global_load", "s_waitcnt", "s_barrier", "s_nop",
    "valu",   "valu_cvt", "valu_trans", "salu"};

int64_t countOf(const LoopProfile &p, llvm::StringRef key) {
  auto it = p.counts.find(key.str());
  return it == p.counts.end() ? int64_t(0) : it->second;
}
} // namespace

void mla::amdgpu::printLoopProfile(const LoopProfile &p,
                                   const TargetInfo &target, int64_t waves,
                                   llvm::raw_ostream &os,
                                   std::optional<double> cacheBytes) {
  auto count = [&](llvm::StringRef key) { return countOf(p, key); };
  os << llvm::format("  main_loop at 0x%llx, per iteration and wave:",
                     (unsigned long long)p.header);
  for (llvm::StringRef key : kCountKeys)
    os << " " << key << "=" << count(key);
  os << "\n";
  // Clocks per iteration for the CU (one wave per SIMD).
  double valu = 4.0 * count("valu") + 12.0 * count("valu_trans");
  double issue = count("total");
  double lds = waves * p.ldsClocks + waves * p.dmaBytes / 128.0;
  double best = std::max({p.mfmaClocks, valu, issue, lds});
  double worst = p.mfmaClocks + valu +
                 (count("total") - count("valu") - count("mfma"));
  double kvBytes = cacheBytes ? *cacheBytes : waves * p.dmaBytes;
  double share = target.clockHz > 0 ? target.hbmBytesPerSecond /
                                          target.computeUnits / target.clockHz
                                    : 0.0;
  // "overlap": every unit busy at once (the slowest bounds); "serial":
  // MFMA, VALU and the other instructions one after another (LDS hidden).
  os << llvm::format("  main_loop_clocks mfma=%.0f valu=%.0f issue=%.0f "
                     "lds=%.0f overlap=%.0f serial=%.0f\n",
                     p.mfmaClocks, valu, issue, lds, best, worst);
  if (kvBytes > 0 && share > 0)
    os << llvm::format("  main_loop_hbm cache_bytes_per_iteration=%.0f "
                       "hbm_share=%.1f bytes_per_clock overlap=%.1f "
                       "serial=%.1f x_hbm overlap=%.2f serial=%.2f "
                       "bytes_from=%s\n",
                       kvBytes, share, kvBytes / best, kvBytes / worst,
                       kvBytes / best / share, kvBytes / worst / share,
                       cacheBytes ? "tile" : "dma");
}

void mla::amdgpu::printLoopShape(const LoopProfile &p, const LoopShape &shape,
                                 llvm::raw_ostream &os) {
  if (shape.kvRowsPerIteration <= 0 || shape.rowsPerWorkgroup <= 0)
    return;
  double per64 = 64.0 / shape.kvRowsPerIteration;
  os << "  main_loop_per_64_kv_rows kv_rows_per_iteration="
     << shape.kvRowsPerIteration;
  for (llvm::StringRef key : kCountKeys)
    os << " " << key << "=" << llvm::format("%g", countOf(p, key) * per64);
  os << "\n";
  // At q_len 1 a block of heads_per_block heads has that many rows: the
  // first workgroup of the block computes rows_per_workgroup rows, the
  // rest of them padding when the block has fewer.
  int64_t real = std::min(shape.rowsPerWorkgroup, shape.headsPerBlock);
  os << llvm::format("  main_loop_rows query_rows_per_workgroup=%lld "
                     "real_rows_at_q_len_1=%lld useful_mfma_share=%.2f\n",
                     (long long)shape.rowsPerWorkgroup, (long long)real,
                     double(real) / shape.rowsPerWorkgroup);
}
