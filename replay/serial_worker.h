#pragma once
// One thread that runs the jobs given to it one at a time, in the order given. Replay keeps two
// for a whole run (reading ahead, comparing behind) instead of a thread per chunk: the threads'
// buffers (a comparison's layout space, OpenSSL's digest context) are then reused, and no
// thread is started per chunk.

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

namespace admission::replay {

// Thread safety: Submit from one thread at a time (the owner).
class SerialWorker {
 public:
  // `nice`: added to the thread's nice value (Linux: per thread), so that a thread on the
  // critical path (replay's fold) keeps a core while this one waits for the other. Best effort.
  // `name`: the thread's name as `top -H` and `perf` show it (Linux: at most 15 characters).
  explicit SerialWorker(int nice = 0, const char* name = nullptr)
      : nice_(nice), name_(name), thread_([this] { Loop(); }) {}
  // Runs the jobs still queued, then joins.
  ~SerialWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `job` (callable once, may be move-only); its result arrives through the future.
  template <typename F>
  std::future<std::invoke_result_t<F&>> Submit(F job) {
    using R = std::invoke_result_t<F&>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(job));
    std::future<R> result = task->get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back([task]() { (*task)(); });
    }
    wake_.notify_one();
    return result;
  }

 private:
  void Loop() {
    if (name_ != nullptr) (void)::pthread_setname_np(::pthread_self(), name_);
    if (nice_ != 0) {
      const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
      (void)::setpriority(PRIO_PROCESS, tid, ::getpriority(PRIO_PROCESS, tid) + nice_);
    }
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  const int nice_;
  const char* const name_;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace admission::replay
