"""The pure decisions over task records: which task goes next, what a failure cancels."""

from __future__ import annotations

from ankka.runtime.records.tasks import TaskRecord, TaskSpec, TaskState, cascade, next_task


def _task(
    id: str, seq: int, state: TaskState = TaskState.ASSIGNED, deps: tuple[str, ...] = ()
) -> TaskRecord:
    spec = TaskSpec("a", "t", "do it", depends_on=deps)
    return TaskRecord(id=id, spec=spec, state=state, budget=3, assigned_seq=seq)


def test_tasks_go_in_assignment_order() -> None:
    chosen, waiting = next_task([_task("b", 2), _task("a", 1)], {})
    assert chosen is not None and chosen.id == "a"
    assert waiting == ()


def test_a_ready_task_goes_before_one_waiting_on_a_dependency() -> None:
    queue = [_task("first", 1, deps=("dep",)), _task("second", 2)]
    chosen, waiting = next_task(queue, {"dep": TaskState.IN_PROGRESS})
    assert chosen is not None and chosen.id == "second"
    assert [t.id for t in waiting] == ["first"]
    chosen, _ = next_task(queue, {"dep": TaskState.COMPLETED})
    assert chosen is not None and chosen.id == "first"


def test_a_task_begun_is_carried_on_before_an_earlier_one() -> None:
    queue = [_task("early", 1), _task("begun", 2, TaskState.RESULT_REJECTED)]
    chosen, _ = next_task(queue, {})
    assert chosen is not None and chosen.id == "begun"


def test_nothing_to_do_when_every_task_waits() -> None:
    chosen, waiting = next_task([_task("x", 1, deps=("d",))], {"d": TaskState.PENDING})
    assert chosen is None and [t.id for t in waiting] == ["x"]


def test_a_failure_cancels_its_dependants_at_any_depth_nearest_first() -> None:
    dependants = {"root": ["b", "a"], "a": ["c"], "c": ["d"], "b": ["c"]}
    states = {k: TaskState.ASSIGNED for k in "abcd"}
    assert cascade("root", dependants, states) == ["a", "b", "c", "d"]


def test_a_dependant_already_final_is_not_cancelled_again() -> None:
    dependants = {"root": ["a", "b"]}
    states = {"a": TaskState.CANCELLED, "b": TaskState.ASSIGNED}
    assert cascade("root", dependants, states) == ["b"]


def test_the_body_digest_ignores_nothing_the_creator_said() -> None:
    one = TaskSpec("a", "t", "do it", depends_on=("x",))
    assert one.digest() == TaskSpec("a", "t", "do it", depends_on=("x",)).digest()
    assert one.digest() != TaskSpec("a", "t", "do it").digest()
    assert one.digest() != TaskSpec("a", "t", "do it!", depends_on=("x",)).digest()
