// Package automations runs Hearth's local automations: small rules of
// triggers, conditions and actions that run inside the daemon. Their main
// purpose is to stand in for a service while its circuit breaker is not
// closed: when a cloud presence service is down, a local motion sensor
// drives the hall light (DESIGN.md, principle 9).
//
// It owns the rules' model (Rule, Trigger, Condition, Action), their
// validation, one event loop (Engine.Run) that handles every event in
// the order it arrived, and one worker per rule that runs its actions. The
// events are: device state reports, MQTT messages, breaker state
// changes and schedule times. It keeps the last state it saw of each
// device and the last state of each breaker, and counts, per rule, the runs
// and the skips.
//
// It never talks to a device, a broker or a store itself: a Command action
// goes through the Commander, which hands the command to Hearth's intake
// like any other caller's, with an op_id and an absolute target, so that
// the dispatcher validates, stores, retries and confirms it. It never reads
// the wall clock (time comes from the injected clockwork.Clock), never uses
// cron's own runner, and never acts on a retained MQTT message: a retained
// message is a replay, and Hearth moves no device because of a replay
// (principle 7).
//
// # Semantics
//
//   - A State trigger fires when an attribute's value differs from the last
//     value the engine saw for it. The first report of an attribute only
//     sets the baseline and fires nothing: after a restart the first
//     report is usually a replay of retained state, not a change.
//   - A Schedule trigger fires at the times of its cron expression in
//     Options.Location. When the clock jumps past several of them at once
//     (a suspended host, a fake clock's Advance), the trigger fires once,
//     not once per missed time, and the next time is computed from the
//     clock's new now.
//   - A Breaker trigger fires when a service's breaker changes state. The
//     gates (Rule.FallbackFor, Rule.Requires) already see the new state
//     when the trigger is evaluated, so a rule with fallback_for: x and a
//     trigger "breaker x to open" runs. A service never reported is closed.
//   - A rule whose gates do not hold is paused: its triggers are counted
//     as skips and logged. So is a trigger whose conditions do not all
//     hold. A rule fires at most once per event, however many of its
//     triggers match it.
//   - A State condition holds on the last value seen, retained or live,
//     except on a device Options.NeedsLive names (Hearth's
//     safety-critical devices): there only a value reported live since
//     the start counts, because a retained one is from before it. A null
//     value satisfies no condition, not even ne.
//   - An MQTT trigger fires once per event: a copy of an event seen within
//     its RepeatWindow of the last copy (a weak link re-sending a scene
//     notification, a broker delivering a message once per overlapping
//     subscription) runs nothing and is counted in RuleStatus.Repeats.
//     MQTTTrigger.EventID says what identifies an event.
//   - A command's op_id is derived from the event, the rule and the
//     action, so the same event handed over again gives the same op_id
//     and Hearth's intake refuses the second command.
//   - The loop only matches events and judges gates and conditions, in
//     the order the events came; a run whose gates and conditions hold is
//     queued for its rule's own worker. Each rule's actions run there, one
//     run at a time, in event order; an action that fails is logged and
//     the rest still run. Rules run independently of each other, so a slow
//     action holds back only its own rule, and the rules one event
//     triggers run in no particular order among themselves. A rule's queue
//     holds Options.QueueLimit runs; past it the oldest waiting run is
//     dropped, logged and counted.
//   - A toggle (CommandAction.Toggle) is resolved once, when its run's
//     actions start, against the confirmed state, into an absolute target.
package automations
