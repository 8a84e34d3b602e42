// `kiln fuzz`: random valid programs run eagerly and compiled in every mode, each batch in a
// child process (the kiln binary itself, in its worker mode) so that a crash is a finding,
// not the end of the run; every finding is shrunk and written as a .kir repro.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "tools/commands.h"
#include "tools/fuzz_rules.h"
#include "tools/fuzz_shrink.h"
#include "tools/fuzz_worker.h"
#include "tools/model_args.h"

extern char** environ;

namespace kiln::tools {
namespace {

constexpr const char* kFuzzUsage =
    "usage: kiln fuzz [--seed S] [--time SECONDS] [--ops LIST] [--modes LIST] [--out DIR]\n"
    "  Generates random valid programs (pointwise chains with broadcasting and promotion,\n"
    "  reductions, views, in-place writes, matmul and conv2d with epilogues, softmax and\n"
    "  layer_norm, mixed dtypes, inputs with and without NaN/Inf/-0.0), runs each eagerly and\n"
    "  through kiln::compile in each mode, and compares them by the f64 reference rule; inputs\n"
    "  must stay unwritten unless eager writes them, and a second call must give the same bits.\n"
    "  Programs run in child processes: a crash is a finding. Each finding is shrunk and\n"
    "  written to DIR as a .kir repro that `kiln run` checks (its `// ARGS:` line).\n"
    "  Ends with `N programs, M mismatches, K crashes`; exit 1 when M + K > 0.\n"
    "  --seed S       the run's seed (default 1): the same seed draws the same programs\n"
    "  --time SECONDS how long to generate programs (default 60)\n"
    "  --ops LIST     rules or groups to draw from (comma-separated): pointwise, reduction,\n"
    "                 view, inplace, matmul, conv, norm, data, or rule names (`--ops list`)\n"
    "  --modes LIST   compile modes (default default,reduce_overhead,max_autotune)\n"
    "  --programs N   stop after N programs (default: when the time is up)\n"
    "  --show I       print program I of the seed (its text, as DIR/finding-N.prog) and exit\n"
    "  --out DIR      where findings go (default ./kiln-fuzz-out)\n"
    "  The child processes' modes: --check FILE [--modes M] checks one program file (exit 0\n"
    "  when it passes); --worker and --emit-kir FILE -o OUT serve the parent.\n";

using Clock = std::chrono::steady_clock;

struct FuzzOptions {
  uint64_t seed = 1;
  double seconds = 60;
  uint64_t max_programs = UINT64_MAX;
  std::vector<std::string> ops;
  std::vector<Mode> modes = {Mode::default_, Mode::reduce_overhead, Mode::max_autotune};
  std::string out = "kiln-fuzz-out";
};

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::stringstream ss{std::string(s)};
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v)
    s += (s.empty() ? "" : ",") + x;
  return s;
}

std::string modes_text(const std::vector<Mode>& modes) {
  std::vector<std::string> names;
  for (Mode m : modes)
    names.emplace_back(mode_name(m));
  return join(names);
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "kiln" : p.string();
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_all(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

/// A child kiln process: stdout to a pipe (or a file), stderr to a file.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;

  Child(const std::vector<std::string>& args, const std::string& stdout_path,
        const std::string& stderr_path) {
    int fds[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (stdout_path.empty()) {
      KILN_CHECK(pipe(fds) == 0, "kiln fuzz: pipe failed: ", std::strerror(errno));
      posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
      posix_spawn_file_actions_addclose(&fa, fds[0]);
      posix_spawn_file_actions_addclose(&fa, fds[1]);
    } else {
      posix_spawn_file_actions_addopen(&fa, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    }
    posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    std::vector<char*> argv;
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (fds[1] >= 0) close(fds[1]);
    out_fd = fds[0];
    KILN_CHECK(rc == 0, "kiln fuzz: cannot start '", args[0], "': ", std::strerror(rc));
  }
  ~Child() {
    if (out_fd >= 0) close(out_fd);
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// Waits for the child; its wait status, or -1 when `timeout_s` passed (it is then killed).
  int wait(double timeout_s) {
    auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return status;
      }
      if (Clock::now() > until) return -1; // the destructor kills it
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};

/// How a child ended, in words ("killed by Aborted", "exit 3").
std::string status_text(int status) {
  if (status < 0) return "timed out";
  if (WIFSIGNALED(status)) return std::string("killed by signal: ") + strsignal(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

FindingKind kind_of_status(int status) {
  if (status < 0) return FindingKind::hang;
  if (WIFSIGNALED(status)) return FindingKind::crash;
  return finding_from_exit_code(WEXITSTATUS(status));
}

/// One program that failed, before and after shrinking.
struct Found {
  uint64_t index = 0;
  Finding finding;
  std::string program;
};

class Fuzzer {
public:
  explicit Fuzzer(FuzzOptions o) : o_(std::move(o)), exe_(self_exe()) {}

  int run() {
    std::filesystem::create_directories(work_dir());
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(o_.seconds));
    next_progress_ = start_ + std::chrono::seconds(10);
    std::cout << "kiln fuzz: seed " << o_.seed << ", " << o_.seconds << " s, modes "
              << modes_text(o_.modes) << (o_.ops.empty() ? "" : ", ops " + join(o_.ops))
              << ", findings to " << o_.out << "/" << std::endl;
    while (Clock::now() < deadline_ && next_ < o_.max_programs)
      run_batch(std::min<uint64_t>(20, o_.max_programs - next_));
    std::cout << programs_ << " programs, " << mismatches_ << " mismatches, " << crashes_
              << " crashes" << std::endl;
    return mismatches_ + crashes_ > 0 ? 1 : 0;
  }

private:
  std::string work_dir() const { return o_.out + "/work"; }
  std::string worker_log() const { return work_dir() + "/worker.log"; }
  double seconds_left() const {
    return std::chrono::duration<double>(deadline_ - Clock::now()).count();
  }

  std::vector<std::string> worker_args(uint64_t first, uint64_t count) const {
    std::vector<std::string> a = {exe_,
                                  "fuzz",
                                  "--worker",
                                  "--seed",
                                  std::to_string(o_.seed),
                                  "--first",
                                  std::to_string(first),
                                  "--count",
                                  std::to_string(count),
                                  "--modes",
                                  modes_text(o_.modes),
                                  "--current",
                                  work_dir() + "/current.prog"};
    if (!o_.ops.empty()) {
      a.push_back("--ops");
      a.push_back(join(o_.ops));
    }
    return a;
  }

  /// Runs programs next_.. in one worker until it ends, crashes, hangs or time is up.
  void run_batch(uint64_t count) {
    Child w(worker_args(next_, count), "", worker_log());
    std::string buffer;
    int64_t running = -1; // the program in flight
    std::vector<Found> found;
    auto last_line = Clock::now();
    for (bool more = true; more;) {
      progress();
      if (seconds_left() <= 0) return; // the program in flight is not counted
      pollfd p{w.out_fd, POLLIN, 0};
      if (poll(&p, 1, 200) == 0) {
        more = !hung(running, last_line, found);
        continue;
      }
      char chunk[4096];
      ssize_t n = read(w.out_fd, chunk, sizeof chunk);
      if (n <= 0) {
        worker_ended(w.wait(10), running, found);
        break;
      }
      last_line = Clock::now();
      buffer.append(chunk, static_cast<size_t>(n));
      for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
        take_line(buffer.substr(0, nl), running, found);
        buffer.erase(0, nl + 1);
      }
    }
    for (Found& f : found)
      report(f);
  }

  /// Whether the program in flight has given no result for too long (a hang finding).
  bool hung(int64_t running, Clock::time_point last_line, std::vector<Found>& found) {
    constexpr double kHangSeconds = 120;
    if (running < 0 ||
        std::chrono::duration<double>(Clock::now() - last_line).count() <= kHangSeconds)
      return false;
    found.push_back({static_cast<uint64_t>(running),
                     {FindingKind::hang, "", "no result after 120 s"},
                     read_all(work_dir() + "/current.prog")});
    next_ = static_cast<uint64_t>(running) + 1;
    ++programs_;
    return true;
  }

  /// The worker's output ended: a crash when a program was in flight or it exited badly.
  void worker_ended(int status, int64_t running, std::vector<Found>& found) {
    if (running >= 0) {
      found.push_back({static_cast<uint64_t>(running),
                       {FindingKind::crash, "", status_text(status)},
                       read_all(work_dir() + "/current.prog")});
      next_ = static_cast<uint64_t>(running) + 1;
      ++programs_;
    } else if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      // Died between programs: while generating program next_ (no program to keep).
      found.push_back({next_, {FindingKind::crash, "", "generating: " + status_text(status)}, ""});
      ++next_;
    }
  }

  void take_line(const std::string& line, int64_t& running, std::vector<Found>& found) {
    std::istringstream is(line);
    std::string what, kind, mode;
    uint64_t index = 0;
    size_t steps = 0;
    is >> what >> index;
    if (what == "start") {
      running = static_cast<int64_t>(index);
      return;
    }
    if (what != "done") return;
    is >> kind >> steps >> mode;
    std::string message;
    std::getline(is, message);
    running = -1;
    next_ = index + 1;
    ++programs_;
    if (kind == "ok" || kind == "invalid") return;
    FindingKind k = kind == "mismatch" ? FindingKind::mismatch : FindingKind::compiled_error;
    found.push_back({index,
                     {k, mode, message.empty() ? "" : message.substr(1)},
                     read_all(work_dir() + "/current.prog." + std::to_string(index))});
  }

  void progress() {
    if (Clock::now() < next_progress_) return;
    next_progress_ = Clock::now() + std::chrono::seconds(10);
    double t = std::chrono::duration<double>(Clock::now() - start_).count();
    std::cout << "kiln fuzz: " << programs_ << " programs, " << mismatches_ << " mismatches, "
              << crashes_ << " crashes (" << static_cast<int>(t) << " s)" << std::endl;
  }

  /// Counts a finding, writes its program, and (the first of its kind) shrinks it to a repro.
  void report(Found& f) {
    bool crash = f.finding.kind == FindingKind::crash || f.finding.kind == FindingKind::hang;
    (crash ? crashes_ : mismatches_) += 1;
    std::string base = o_.out + "/finding-" + std::to_string(++findings_);
    write_all(base + ".prog", f.program);
    std::cout << "finding " << findings_ << ": program " << f.index << ": "
              << finding_kind_name(f.finding.kind)
              << (f.finding.mode.empty() ? "" : " in " + f.finding.mode) << ": "
              << f.finding.message << "\n  program: " << base << ".prog" << std::endl;
    if (f.program.empty()) return;
    std::string signature = std::string(finding_kind_name(f.finding.kind)) + " " + f.finding.mode +
                            " " + f.finding.message.substr(0, 40);
    for (char& c : signature)
      if (std::isdigit(static_cast<unsigned char>(c))) c = '#';
    if (f.finding.kind == FindingKind::hang || !signatures_.insert(signature).second ||
        signatures_.size() > 8)
      return;
    shrink_and_write(f, base);
  }

  /// The finding's kind when the program is checked alone in `mode` (or every mode).
  FindingKind check_alone(const Program& p, const std::string& mode) {
    std::string path = work_dir() + "/candidate.prog";
    write_all(path, program_text(p));
    Child c({exe_, "fuzz", "--check", path, "--modes", mode.empty() ? modes_text(o_.modes) : mode},
            work_dir() + "/candidate.out", worker_log());
    return kind_of_status(c.wait(120));
  }

  void shrink_and_write(const Found& f, const std::string& base) {
    Program p = parse_program(f.program);
    FindingKind want = f.finding.kind;
    if (check_alone(p, f.finding.mode) != want) {
      std::cout << "  not reproduced when run alone; kept as " << base << ".prog" << std::endl;
      return;
    }
    Program small = shrink_program(
        p, [&](const Program& c) { return check_alone(c, f.finding.mode) == want; }, 120);
    write_all(base + ".min.prog", program_text(small));
    std::string mode = f.finding.mode.empty() ? "default" : f.finding.mode;
    std::string args = "--seed " + std::to_string(small.input_seed) + " --mode " + mode +
                       (small.specials ? " --specials" : "");
    std::string header = "// kiln fuzz repro: " + std::string(finding_kind_name(want)) + " in " +
                         mode + ": " + f.finding.message + "\n// found by: kiln fuzz --seed " +
                         std::to_string(o_.seed) + " (program " + std::to_string(f.index) +
                         "), shrunk from " + std::to_string(p.steps.size()) + " to " +
                         std::to_string(small.steps.size()) + " steps\n// ARGS: " + args + "\n";
    Child e(
        {exe_, "fuzz", "--emit-kir", base + ".min.prog", "-o", base + ".kir", "--header", header},
        work_dir() + "/emit.out", worker_log());
    int status = e.wait(120);
    if (status != 0) {
      std::cout << "  shrunk to " << small.steps.size() << " steps: " << base
                << ".min.prog (no .kir: writing it " << status_text(status) << ")" << std::endl;
      return;
    }
    std::vector<std::string> run = {exe_, "run", base + ".kir"};
    std::istringstream words(args);
    for (std::string w; words >> w;)
      run.push_back(w);
    Child v(run, base + ".run.txt", worker_log());
    int vs = v.wait(120);
    std::cout << "  shrunk to " << small.steps.size() << " steps: " << base << ".kir ("
              << (vs == 0 ? "kiln run does NOT reproduce it"
                          : "kiln run reproduces it: " + status_text(vs))
              << ")\n  repro: kiln run " << base << ".kir " << args << std::endl;
  }

  FuzzOptions o_;
  std::string exe_;
  Clock::time_point start_, deadline_, next_progress_;
  uint64_t next_ = 0;
  int64_t programs_ = 0, mismatches_ = 0, crashes_ = 0;
  int findings_ = 0;
  std::set<std::string> signatures_;
};

int list_rules() {
  for (const Rule& r : fuzz_rules())
    std::cout << r.group << "\t" << r.name << "\n";
  return 0;
}

bool parse_modes(std::string_view text, std::vector<Mode>& out) {
  out.clear();
  try {
    for (const std::string& m : split_list(text))
      out.push_back(parse_mode(m));
  } catch (const Error&) {
    return false;
  }
  return !out.empty();
}

/// The command line as given; `resolve` checks it into FuzzOptions.
struct FuzzArgs {
  bool help = false, worker = false;
  std::string seed, seconds, programs, show, ops, modes, out;
  // The child-process modes: --worker (--first, --count, --current), --check, --emit-kir.
  std::string first, count, current, check, emit, emit_out, header;
};

std::optional<CommandError> parse_fuzz_args(std::span<const std::string_view> args, FuzzArgs& a) {
  const std::pair<std::string_view, std::string*> flags[] = {
      {"--seed", &a.seed},       {"--time", &a.seconds}, {"--programs", &a.programs},
      {"--show", &a.show},       {"--ops", &a.ops},      {"--modes", &a.modes},
      {"--out", &a.out},         {"--first", &a.first},  {"--count", &a.count},
      {"--current", &a.current}, {"--check", &a.check},  {"--emit-kir", &a.emit},
      {"-o", &a.emit_out},       {"--header", &a.header}};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      a.help = true;
      return std::nullopt;
    }
    if (args[i] == "--worker") {
      a.worker = true;
      continue;
    }
    std::optional<CommandError> err;
    bool taken = false;
    for (const auto& [flag, value] : flags)
      if (!taken && flag_value(args, i, flag, *value, err)) taken = true;
    if (err) return err;
    if (!taken) return usage_error("unknown option '" + std::string(args[i]) + "'");
  }
  return std::nullopt;
}

std::optional<CommandError> resolve(const FuzzArgs& a, FuzzOptions& o, uint64_t& show) {
  if (!a.seed.empty() && !parse_uint(a.seed, o.seed))
    return usage_error("bad --seed '" + a.seed + "': expected an integer");
  if (!a.programs.empty() && (!parse_uint(a.programs, o.max_programs) || o.max_programs == 0))
    return usage_error("bad --programs '" + a.programs + "': expected a count");
  uint64_t seconds = 0;
  if (!a.seconds.empty() && !parse_uint(a.seconds, seconds))
    return usage_error("bad --time '" + a.seconds + "': expected seconds");
  if (!a.seconds.empty()) o.seconds = static_cast<double>(seconds);
  o.ops = split_list(a.ops);
  for (const std::string& name : o.ops)
    if (select_rules({name}).empty())
      return usage_error("unknown rule or group '" + name + "' in --ops");
  if (!a.modes.empty() && !parse_modes(a.modes, o.modes))
    return usage_error("bad --modes '" + a.modes +
                       "': expected default, reduce_overhead, max_autotune");
  if (!a.out.empty()) o.out = a.out;
  if (!a.show.empty() && !parse_uint(a.show, show))
    return usage_error("bad --show '" + a.show + "': expected a program index");
  return std::nullopt;
}

} // namespace

int fuzz_main(std::span<const std::string_view> args) {
  FuzzArgs a;
  if (auto err = parse_fuzz_args(args, a)) return report("fuzz", *err);
  if (a.help) {
    std::cout << kFuzzUsage;
    return 0;
  }
  if (a.ops == "list") return list_rules();
  FuzzOptions o;
  uint64_t show = 0;
  if (auto err = resolve(a, o, show)) return report("fuzz", *err);
  try {
    if (!a.show.empty()) {
      std::cout << program_text(generate_program(o.seed, show, select_rules(o.ops)));
      return 0;
    }
    if (!a.check.empty()) return check_main(a.check, o.modes);
    if (!a.emit.empty()) return emit_kir_main(a.emit, a.emit_out, a.header);
    if (!a.worker) return Fuzzer(o).run();
    WorkerArgs w{o.seed, 0, 0, o.ops, o.modes, a.current};
    if (!parse_uint(a.first, w.first) || !parse_uint(a.count, w.count) || w.current_path.empty())
      return report("fuzz", usage_error("--worker needs --first, --count and --current"));
    return worker_main(w);
  } catch (const Error& e) {
    return report("fuzz", runtime_error(e.message()));
  }
}

} // namespace kiln::tools
