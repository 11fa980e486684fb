// Publishing a built closure to the farm's bucket: through the scheduler
// (today's path: the worker sends each NAR over its connection, the
// scheduler registers it, then its publisher thread reads, compresses and
// uploads it) against direct uploads (the worker compresses and PUTs to a
// presigned staging key; the scheduler's verifier thread reads the object
// back once, checks it, copies it to its final key on the store's side and
// adds the NAR to the central store without hashing it again), and
// direct uploads as they were before that hand-over (`--direct-rehash`:
// the central store hashes the verified NAR again). Same run, same
// collection, one real radosgw on loopback (tests/support/object_store.h),
// WORKERS workers each, needs root (tests/support/farm.h):
//
//   direct_upload_bench [MIB] [JOBS] [WORKERS]   (default 1024 8 2)
//   ONLY=scheduler|direct|rehash runs one of them (to profile it).
//   REPEAT=N runs the three N times in turn and prints the median ratios:
//   on a loaded machine one run's figures swing by a fifth or more. The
//   OSD's memstore is sized for all of them (about 3 × MIB × N MiB).
//
// JOBS derivations each write MIB/JOBS MiB (base64 of /dev/urandom:
// compresses to about 3/4). For each path: the wall time from the
// evaluation to the last signed narinfo in the bucket, the scheduler's CPU
// (user + sys from /proc/PID/stat) and the bytes it read and wrote
// (/proc/PID/io rchar/wchar: sockets and files), the workers' CPU, and
// the NAR bytes received over ZeroMQ (kiln_transfer_bytes_received_total).
// Not a test: prints figures; exits 1 only if a build fails.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "farm.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "object_store.h"

namespace kiln::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A process's CPU seconds (user + sys) and I/O bytes (rchar + wchar).
struct Usage {
  double cpu = 0;
  double readMiB = 0, writtenMiB = 0;
};

Usage usageOf(pid_t pid) {
  Usage u;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) u.cpu += std::stod(field);
    if (i == 15) u.cpu += std::stod(field);
  }
  u.cpu /= double(sysconf(_SC_CLK_TCK));
  std::ifstream io("/proc/" + std::to_string(pid) + "/io");
  std::string key;
  uint64_t v = 0;
  while (io >> key >> v) {
    if (key == "rchar:") u.readMiB = double(v) / 1048576;
    if (key == "wchar:") u.writtenMiB = double(v) / 1048576;
  }
  return u;
}

// CPU seconds of the object store's processes (radosgw, ceph-osd,
// ceph-mon: their command lines name their configuration under `dir`).
double storeCpu(const std::string& dir) {
  double cpu = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    try {
      std::string cmd = readFile(e.path().string() + "/cmdline");
      if (cmd.find(dir) != std::string::npos &&
          cmd.find("direct_upload_bench") == std::string::npos)
        cpu += usageOf(std::stoi(name)).cpu;
    } catch (const std::exception&) {  // gone meanwhile
    }
  }
  return cpu;
}

struct Figures {
  double wall = 0;
  double storeCpu = 0;  ///< the object store's processes
  Usage scheduler, worker;
  double zmqMiB = 0;
  double compressedMiB = 0;
};

std::string collection(int mib, int jobs) {
  std::string body = "{\n";
  int each = mib / jobs;
  for (int i = 0; i < jobs; ++i)
    body += "  part" + std::to_string(i) + " = mk \"part" + std::to_string(i) +
            "\" \"mkdir $out; head -c " + std::to_string(each * 3 / 4) +
            "M /dev/urandom | base64 -w 0 > $out/data\" [];\n";
  return body + "}";
}

// The workers' usage, summed.
Usage workersUsage(test::Farm& farm) {
  Usage sum;
  for (size_t i = 0; i < farm.workerCount(); ++i) {
    Usage u = usageOf(farm.worker(i).pid());
    sum.cpu += u.cpu;
    sum.readMiB += u.readMiB;
    sum.writtenMiB += u.writtenMiB;
  }
  return sum;
}

// How outputs reach the bucket.
enum class Path { kThroughScheduler, kDirectRehash, kDirect };

Figures runOnce(test::ObjectStoreServer& s3, const std::string& dir,
                const std::string& bucket, Path path, int mib, int jobs,
                int workers) {
  s3.createBucket(bucket, false);
  test::FarmOptions o;
  o.schedulerArgs = {"--cache", s3.uri(bucket), "--no-fsync-store"};
  bool direct = path != Path::kThroughScheduler;
  if (direct) o.schedulerArgs.push_back("--direct-uploads");
  if (path == Path::kDirectRehash) o.schedulerArgs.push_back("--direct-rehash");
  o.schedulerEnv = {{"AWS_ACCESS_KEY_ID", s3.accessKey()},
                    {"AWS_SECRET_ACCESS_KEY", s3.secretKey()}};
  test::Farm farm(o);
  farm.startScheduler();
  test::WorkerOptions w;
  w.extraArgs = {"--no-fsync-store"};
  if (direct) w.extraArgs.push_back("--direct-uploads");
  for (int i = 0; i < workers; ++i) farm.addWorker(w);
  if (!farm.waitForWorkers(size_t(workers), 60s))
    throw Error("the workers did not join");
  auto coll = farm.writeCollection("coll", collection(mib, jobs));
  farm.createJobset("p", "j", coll);
  Usage s0 = usageOf(farm.scheduler().pid());
  Usage w0 = workersUsage(farm);
  double store0 = storeCpu(dir);
  auto start = Clock::now();
  int64_t eval = farm.evaluate("p", "j");
  if (!farm.waitForBuilds(eval, 3600s)) throw Error("builds did not finish");
  for (auto& b : farm.builds(eval))
    if (b.status != 0) throw Error(b.job + " failed: " + b.error);
  store::S3CacheStorage cache(s3.uri(bucket));
  std::vector<std::string> narinfos;
  for (auto& out : farm.view()->outputs(eval))
    narinfos.push_back(baseNameOf(out.path).substr(0, 32) + ".narinfo");
  Figures f;
  for (auto& n : narinfos)
    while (!cache.exists(n)) std::this_thread::sleep_for(50ms);
  f.wall = std::chrono::duration<double>(Clock::now() - start).count();
  Usage s1 = usageOf(farm.scheduler().pid());
  Usage w1 = workersUsage(farm);
  f.storeCpu = storeCpu(dir) - store0;
  f.scheduler = {s1.cpu - s0.cpu, s1.readMiB - s0.readMiB,
                 s1.writtenMiB - s0.writtenMiB};
  f.worker = {w1.cpu - w0.cpu, w1.readMiB - w0.readMiB,
              w1.writtenMiB - w0.writtenMiB};
  f.zmqMiB =
      farm.metric("kiln_transfer_bytes_received_total").value_or(0) / 1048576;
  for (auto& obj : cache.listObjects("nar/", 100000))
    f.compressedMiB += double(obj.size) / 1048576;
  return f;
}

void print(const char* name, const Figures& f, int mib) {
  double perGiB = 1024.0 / mib;
  std::printf(
      "%-10s wall %6.1f s | scheduler cpu %6.2f s (%5.2f s/GiB), read %7.1f "
      "MiB, wrote %7.1f MiB | workers cpu %6.2f s | object store cpu %6.2f s "
      "| over ZeroMQ %7.1f MiB | in the bucket %7.1f MiB\n",
      name, f.wall, f.scheduler.cpu, f.scheduler.cpu * perGiB,
      f.scheduler.readMiB, f.scheduler.writtenMiB, f.worker.cpu, f.storeCpu,
      f.zmqMiB, f.compressedMiB);
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln;
  using bench::Path;
  int mib = argc > 1 ? std::atoi(argv[1]) : 1024;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 8;
  int workers = argc > 3 ? std::atoi(argv[3]) : 2;
  if (mib < jobs || jobs < 1 || workers < 1 || workers > 16) {
    std::cerr << "usage: direct_upload_bench [MIB] [JOBS] [WORKERS]\n";
    return 2;
  }
  std::string why;
  if (!test::ObjectStoreServer::canRun(&why)) {
    std::cerr << why << "\n";
    return 2;
  }
  try {
    const char* repeatEnv = std::getenv("REPEAT");
    int repeat = std::clamp(repeatEnv ? std::atoi(repeatEnv) : 1, 1, 20);
    // Room for every run's objects and a staged copy in the OSD (its
    // memstore does not give back what is deleted in time for the next).
    setenv("KILN_S3_MEMORY",
           std::to_string((uint64_t(mib) * 3 * repeat + 1024) << 20).c_str(),
           1);
    TempDir dir("kiln-direct-bench");
    test::ObjectStoreServer s3(dir.path() + "/s3");
    s3.exportCredentials();
    s3.start();
    // ONLY=scheduler, direct or rehash runs one path (e.g. to profile it).
    const char* only = std::getenv("ONLY");
    std::string one = only ? only : "";
    auto run = [&](const char* name, const std::string& bucket, Path path) {
      bench::Figures f;
      if (one.empty() || one == name)
        f = bench::runOnce(s3, dir.path(), bucket, path, mib, jobs, workers);
      return f;
    };
    std::vector<double> wallRatio, cpuRatio, rehashRatio;
    for (int r = 0; r < repeat; ++r) {
      std::string n = std::to_string(r);
      bench::Figures through =
          run("scheduler", "through" + n, Path::kThroughScheduler);
      bench::Figures rehash = run("rehash", "rehash" + n, Path::kDirectRehash);
      bench::Figures direct = run("direct", "direct" + n, Path::kDirect);
      std::printf("run %d: %d MiB of NAR in %d outputs, %d workers\n", r + 1,
                  mib, jobs, workers);
      bench::print("scheduler", through, mib);
      bench::print("rehash", rehash, mib);
      bench::print("direct", direct, mib);
      wallRatio.push_back(direct.wall / through.wall);
      cpuRatio.push_back(direct.scheduler.cpu / through.scheduler.cpu);
      rehashRatio.push_back(direct.scheduler.cpu / rehash.scheduler.cpu);
      std::printf(
          "direct/scheduler: wall %.2f, scheduler cpu %.2f, scheduler "
          "bytes read %.2f; direct/rehash (the registrar trusting the "
          "verifier's hash): scheduler cpu %.2f\n",
          wallRatio.back(), cpuRatio.back(),
          direct.scheduler.readMiB / through.scheduler.readMiB,
          rehashRatio.back());
      std::fflush(stdout);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf(
        "median of %d: direct/scheduler wall %.2f, scheduler cpu %.2f; "
        "direct/rehash scheduler cpu %.2f\n",
        repeat, median(wallRatio), median(cpuRatio), median(rehashRatio));
  } catch (const std::exception& e) {
    std::cerr << "direct_upload_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
