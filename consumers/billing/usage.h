#pragma once
// Billing's usage model is the decider's (projections/usage.h: one fold for billing and budgets,
// docs/budgets.md); billing folds a stored ledger with it.

#include "ledger/event_log.h"
#include "projections/usage.h"

namespace admission::consumers::billing {

using projections::Attribution;
using projections::AttributionFields;
using projections::Interval;
using projections::QuotaSpan;
using projections::UsageFold;
using projections::UsageKind;

// Folds the events [1, head] of a log. Errors: the log's, and kCorruption (an undecodable event).
Result<UsageFold> FoldLedger(ledger::EventLog& log);

}  // namespace admission::consumers::billing
