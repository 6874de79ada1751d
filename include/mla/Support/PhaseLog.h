//===- PhaseLog.h - what a tool is doing, with elapsed times ----*- C++ -*-===//
//
// Compiling an artifact, JIT-compiling a form or emulating a launch takes
// seconds; a tool that stays silent meanwhile looks hung. A PhaseLog prints
// one line per phase on stderr — "mla-run: compiling the artifact ... 1.61 s"
// — when stderr is a terminal or --verbose asks, and nothing otherwise, so
// scripts and tests see the same output as before.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_SUPPORT_PHASELOG_H
#define MLA_SUPPORT_PHASELOG_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>

namespace mla {

class PhaseLog {
public:
  explicit PhaseLog(llvm::StringRef tool) : tool(tool.str()) {}

  /// Lines are printed with --verbose or when stderr is a terminal.
  void enable(bool verbose) {
    enabled = verbose || llvm::sys::Process::StandardErrIsDisplayed();
  }

  /// A phase: its line starts when it is made and ends, with the elapsed
  /// time, when it goes out of scope.
  class Phase {
  public:
    Phase(PhaseLog &log, const llvm::Twine &what) : log(log) {
      if (!log.enabled)
        return;
      llvm::outs().flush(); // keep stdout's lines ahead of ours
      llvm::errs() << log.tool << ": " << what << " ... ";
      llvm::errs().flush();
      log.lineOpen = true;
      start = std::chrono::steady_clock::now();
    }
    ~Phase() {
      if (!log.lineOpen)
        return;
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      llvm::errs() << llvm::format("%.2f s\n", seconds);
      log.lineOpen = false;
    }
    Phase(const Phase &) = delete;
    Phase &operator=(const Phase &) = delete;

  private:
    PhaseLog &log;
    std::chrono::steady_clock::time_point start;
  };

  Phase phase(const llvm::Twine &what) { return Phase(*this, what); }

  /// Ends an open phase line before an error is printed; flushes stdout so
  /// what the tool printed comes before the error.
  void interrupt() {
    llvm::outs().flush();
    if (lineOpen)
      llvm::errs() << "failed\n";
    lineOpen = false;
  }

private:
  std::string tool;
  bool enabled = false, lineOpen = false;
};

} // namespace mla

#endif // MLA_SUPPORT_PHASELOG_H
