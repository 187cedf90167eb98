// Engine: admission fair sharing (engine v14). Kueue: pkg/util/admissionfairsharing
// (CalculateUsage, CalculateDecayedConsumed, CalculateEntryPenalty), pkg/cache/queue/afs (the
// AfsUsageLedger and its entry penalties), pkg/cache/queue/cluster_queue.go (queueOrderingFunc),
// the LocalQueue controller's sampling (reconcileConsumedUsage) and the Workload controller's
// settlement (updateAfsConsumedUsage). docs/semantics.md, "Admission fair sharing".
//
// Kueue computes in float64 with math.Pow; a ledger replayed for years cannot depend on a libm,
// so the decay factor 2^(-t/halfLife) is computed here in Q62 fixed point from square roots
// taken in integers, and usage is compared as exact integer cross products.

#include <algorithm>
#include <array>

#include "projections/engine.h"
#include "projections/engine_internal.h"

namespace admission::projections {

namespace {

using U128 = unsigned __int128;
constexpr int kQ = 62;
constexpr uint64_t kOne = uint64_t{1} << kQ;
// Binary digits of the fractional part of t/halfLife taken into the decay factor: the factor's
// relative error stays below 2^-40, far below what can turn an order of two queues.
constexpr int kFractionBitsMax = 40;

// floor(sqrt(v)), exactly.
uint64_t ISqrt(U128 v) {
  U128 lo = 0, hi = U128{1} << 64;  // sqrt(v) < 2^64
  while (hi - lo > 1) {             // at most 64 halvings
    const U128 mid = (lo + hi) / 2;
    if (mid * mid <= v) lo = mid; else hi = mid;
  }
  return static_cast<uint64_t>(lo);
}

// kRoots[i] = 2^(-2^-(i+1)) in Q62: square roots of one half, taken again and again.
const std::array<uint64_t, kFractionBitsMax>& Roots() {
  static const std::array<uint64_t, kFractionBitsMax> roots = [] {
    std::array<uint64_t, kFractionBitsMax> r{};
    r[0] = ISqrt(U128{1} << (2 * kQ - 1));  // sqrt(1/2)
    for (int i = 1; i < kFractionBitsMax; ++i) r[i] = ISqrt(U128{r[i - 1]} << kQ);
    return r;
  }();
  return roots;
}

}  // namespace

uint64_t Pow2NegQ62(uint64_t num, uint64_t den) {
  const uint64_t whole = num / den;
  if (whole >= kQ) return 0;
  uint64_t rem = num % den;
  U128 result = kOne;
  const auto& roots = Roots();
  for (int i = 0; i < kFractionBitsMax && rem != 0; ++i) {
    rem *= 2;  // rem < den <= 2^63: no overflow
    if (rem >= den) {
      rem -= den;
      result = (result * roots[static_cast<size_t>(i)]) >> kQ;
    }
  }
  return static_cast<uint64_t>(result >> whole);
}

namespace {

// floor(x * d / 2^62) for a Q62 factor d <= 2^62. Unsigned 128-bit products only: a signed one
// needs __muloti4 under UBSan, which libgcc lacks.
int64_t ScaleFloor(int64_t x, uint64_t d) {
  if (x >= 0) return static_cast<int64_t>((static_cast<U128>(x) * d) >> kQ);
  const U128 magnitude = static_cast<U128>(-static_cast<__int128>(x));
  return -static_cast<int64_t>((magnitude * d + (kOne - 1)) >> kQ);  // rounds toward -inf
}

// Kueue's CalculateDecayedConsumed: old * d + usage * (1 - d), over the union of resources,
// with d = 2^(-elapsed/halfLife) in Q62.
void Decay(std::map<int, int64_t>& consumed, const std::map<int, int64_t>& usage, uint64_t d) {
  std::map<int, int64_t> out;
  auto put = [&](int r, int64_t old_value, int64_t use) {
    const int64_t v = use + ScaleFloor(old_value - use, d);
    if (v != 0) out[r] = v;
  };
  for (const auto& [r, v] : consumed) {
    auto u = usage.find(r);
    put(r, v, u == usage.end() ? 0 : u->second);
  }
  for (const auto& [r, u] : usage) {
    if (consumed.count(r) == 0) put(r, 0, u);
  }
  consumed = std::move(out);
}

void AddInto(std::map<int, int64_t>& to, const std::map<int, int64_t>& amounts, int sign) {
  for (const auto& [r, v] : amounts) {
    int64_t& slot = to[r];
    slot += sign * v;
    if (slot == 0) to.erase(r);
  }
}

}  // namespace

int AfsScore::Compare(const AfsScore& other) const {
  const bool inf = weight_milli <= 0, other_inf = other.weight_milli <= 0;
  if (inf || other_inf) return inf == other_inf ? 0 : (inf ? 1 : -1);
  // usage / weight_milli against other.usage / other.weight_milli, exactly and without
  // overflow: whole quotients first, then the remainders' cross products (each below 2^126).
  const U128 a = static_cast<U128>(usage), b = static_cast<U128>(other.usage);
  const U128 wa = static_cast<U128>(weight_milli), wb = static_cast<U128>(other.weight_milli);
  const U128 qa = a / wa, qb = b / wb;
  if (qa != qb) return qa < qb ? -1 : 1;
  const U128 ra = (a % wa) * wb, rb = (b % wb) * wa;
  return ra < rb ? -1 : (ra > rb ? 1 : 0);
}

AfsEntry& Engine::AfsEntryOf(const std::string& local_queue_key, int64_t now) {
  auto found = afs_.find(local_queue_key);
  if (found != afs_.end()) return found->second;
  // Kueue's initializeAfsIfNeeded: seeded from the persisted status, the clock from now.
  AfsEntry& entry = afs_[local_queue_key];
  entry.last_update_ns = now;
  auto lq = lqs_.find(local_queue_key);
  if (lq != lqs_.end() && lq->second.has_consumed_seed) entry.consumed = lq->second.consumed_seed;
  return entry;
}

std::map<int, int64_t> Engine::AfsAdmittedUsage(const std::string& local_queue_key) const {
  std::map<int, int64_t> usage;
  auto lq = lqs_.find(local_queue_key);
  if (lq == lqs_.end()) return usage;
  auto cq = cqs_.find(lq->second.cluster_queue);
  if (cq == cqs_.end()) return usage;
  for (const Holder& h : cq->second.holders) {
    if (h.wl->phase != Phase::kAdmitted || h.wl->local_queue_key != local_queue_key) continue;
    for (const auto& [fr, amount] : h.wl->admission.usage) usage[FrResource(fr)] += amount;
  }
  return usage;
}

void Engine::AfsSync(int64_t now) {
  if (!AfsOn()) return;
  for (const auto& [key, lq] : lqs_) AfsEntryOf(key, now);
  for (auto& [key, entry] : afs_) {
    // Kueue's SubPenalty: a penalty whose workload left this LocalQueue, ended or is gone
    // never settles.
    for (auto p = entry.penalties.begin(); p != entry.penalties.end();) {
      auto wl = workloads_.find(p->first);
      const bool stays = wl != workloads_.end() && !Terminal(wl->second.phase) &&
                         wl->second.local_queue_key == key;
      if (stays) { ++p; continue; }
      AddInto(entry.penalty_total, p->second, -1);
      p = entry.penalties.erase(p);
    }
    // The LocalQueue controller's sampling ticks since the last one, with the admitted usage
    // constant in between: consumed -> usage + (consumed - usage) * 2^(-ticks*interval/halfLife).
    if (now - entry.last_update_ns < config_.afs_sampling_ns) continue;
    const int64_t ticks = (now - entry.last_update_ns) / config_.afs_sampling_ns;
    const int64_t span = ticks * config_.afs_sampling_ns;
    if (config_.afs_half_life_ns <= 0) {
      entry.consumed.clear();  // Kueue resets the consumed usage when the half-life is 0
    } else {
      Decay(entry.consumed, AfsAdmittedUsage(key),
            Pow2NegQ62(static_cast<uint64_t>(span), static_cast<uint64_t>(config_.afs_half_life_ns)));
    }
    entry.last_update_ns += span;
  }
}

void Engine::AfsPushPenalty(const WorkloadState& wl, int64_t now) {
  if (config_.afs_half_life_ns <= 0) return;  // Kueue's alpha is 0: no penalty
  // CalculateEntryPenalty: the reservation's requests times 1 - 2^(-interval/halfLife).
  const uint64_t d = Pow2NegQ62(static_cast<uint64_t>(config_.afs_sampling_ns),
                             static_cast<uint64_t>(config_.afs_half_life_ns));
  std::map<int, int64_t> requests;
  for (const auto& [fr, amount] : wl.admission.usage) requests[FrResource(fr)] += amount;
  std::map<int, int64_t> penalty;
  for (const auto& [r, v] : requests) {
    const int64_t kept = ScaleFloor(v, d);
    if (v - kept != 0) penalty[r] = v - kept;
  }
  AfsEntry& entry = AfsEntryOf(wl.local_queue_key, now);
  auto old = entry.penalties.find(wl.key);
  if (old != entry.penalties.end()) AddInto(entry.penalty_total, old->second, -1);
  AddInto(entry.penalty_total, penalty, +1);
  entry.penalties[wl.key] = std::move(penalty);
}

void Engine::AfsSettle(const WorkloadState& wl, int64_t now) {
  // Kueue's updateAfsConsumedUsage, on the transition into Admitted: decay since the last
  // update toward the admitted usage (this workload included), then fold its penalty in.
  AfsEntry& entry = AfsEntryOf(wl.local_queue_key, now);
  const int64_t elapsed = std::max<int64_t>(0, now - entry.last_update_ns);
  if (config_.afs_half_life_ns > 0) {
    Decay(entry.consumed, AfsAdmittedUsage(wl.local_queue_key),
          Pow2NegQ62(static_cast<uint64_t>(elapsed), static_cast<uint64_t>(config_.afs_half_life_ns)));
  }
  auto penalty = entry.penalties.find(wl.key);
  if (penalty != entry.penalties.end()) {
    AddInto(entry.consumed, penalty->second, +1);
    AddInto(entry.penalty_total, penalty->second, -1);
    entry.penalties.erase(penalty);
  }
  entry.last_update_ns = std::max(entry.last_update_ns, now);
}

AfsScore Engine::AfsScoreOf(const std::string& local_queue_key) const {
  AfsScore score;
  auto lq = lqs_.find(local_queue_key);
  // Kueue's ResolveLQWeight: a LocalQueue it cannot find weighs 1.
  score.weight_milli = lq == lqs_.end() ? 1000 : lq->second.weight_milli;
  auto entry = afs_.find(local_queue_key);
  if (entry == afs_.end()) return score;
  // Saturates at 2^126 (terms are below 2^63 each: amounts and weights are non-negative int64),
  // so two usages that large compare equal rather than overflow.
  constexpr __int128 kUsageMax = static_cast<__int128>(1) << 126;
  auto add = [&](const std::map<int, int64_t>& amounts) {
    for (const auto& [r, v] : amounts) {
      auto w = config_.afs_weights_milli.find(r);
      const int64_t weight = w == config_.afs_weights_milli.end() ? 1000 : w->second;
      const __int128 term = static_cast<__int128>(static_cast<U128>(std::max<int64_t>(v, 0)) *
                                                  static_cast<U128>(std::max<int64_t>(weight, 0)));
      score.usage = term >= kUsageMax - score.usage ? kUsageMax : score.usage + term;
    }
  };
  add(entry->second.consumed);
  add(entry->second.penalty_total);
  return score;
}

bool Engine::AfsHeadBefore(const QueueKey& a, const QueueKey& b) const {
  if (a.wl->local_queue_key != b.wl->local_queue_key) {
    const int c = AfsScoreOf(a.wl->local_queue_key).Compare(AfsScoreOf(b.wl->local_queue_key));
    if (c != 0) return c < 0;
  }
  return HeadBefore(a, b);
}

}  // namespace admission::projections
