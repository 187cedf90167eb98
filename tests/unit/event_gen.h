#pragma once
// Random events for property tests: varied bodies, strings and keys, built deterministically
// from rapidcheck's generators so a failing case shrinks and replays.

#include <string>
#include <vector>

#include <capnp/message.h>
#include <rapidcheck.h>

#include "schema/event_codec.h"

namespace admission::testing {

struct EventSpec {
  int kind = 0;            // which body
  std::string a, b, c;     // strings placed in the body
  int64_t number = 0;
  std::string key;         // idempotency key ("" for none)
  std::string actor;
};

inline std::string BuildEvent(const EventSpec& spec, int64_t recorded_at_ns) {
  capnp::MallocMessageBuilder message;
  schema::Event::Builder event = message.initRoot<schema::Event>();
  event.setRecordedAtNs(recorded_at_ns);
  event.setActor(spec.actor);
  event.setIdempotencyKey(spec.key);
  switch (spec.kind % 5) {
    case 0: {
      auto w = event.initBody().initWorkloadDeleted().initWorkload();
      w.setNamespace(spec.a);
      w.setName(spec.b);
      w.setUid(spec.c);
      break;
    }
    case 1:
      event.initBody().initClockAdvanced().setToNs(spec.number);
      break;
    case 2: {
      auto f = event.initBody().initFlavorDefined();
      f.setName(spec.a);
      auto labels = f.initNodeLabels(2);
      labels[0].setKey("gpu.model");
      labels[0].setValue(spec.b);
      labels[1].setKey("region");
      labels[1].setValue(spec.c);
      break;
    }
    case 3: {
      auto r = event.initBody().initCheckStateReported();
      r.initWorkload().setName(spec.a);
      r.setCheck(spec.b);
      r.setGeneration(static_cast<uint64_t>(spec.number));
      r.setState(schema::CheckState::READY);
      r.setMessage(spec.c);
      break;
    }
    default: {
      auto p = event.initBody().initPreempted();
      p.initWorkload().setUid(spec.a);
      p.initPreemptor().setUid(spec.b);
      p.setReason(spec.c);
      event.setCausationSequence(static_cast<uint64_t>(spec.number));
      event.setEngineVersion(1);
      break;
    }
  }
  return schema::EncodeEvent(message);
}

inline rc::Gen<EventSpec> GenEventSpec() {
  return rc::gen::build<EventSpec>(
      rc::gen::set(&EventSpec::kind, rc::gen::inRange(0, 5)),
      rc::gen::set(&EventSpec::a, rc::gen::container<std::string>(rc::gen::inRange('a', 'z'))),
      rc::gen::set(&EventSpec::b, rc::gen::string<std::string>()),
      rc::gen::set(&EventSpec::c, rc::gen::container<std::string>(rc::gen::inRange('0', '9'))),
      rc::gen::set(&EventSpec::number, rc::gen::arbitrary<int64_t>()),
      rc::gen::set(&EventSpec::actor, rc::gen::element<std::string>("ops", "scanner", "")),
      rc::gen::set(&EventSpec::key, rc::gen::element<std::string>("", "", "k1", "k2", "k3")));
}

}  // namespace admission::testing
