"""The fight log's window and the managedFields reading that names the other writer."""

from __future__ import annotations

from webserver_operator.reconcile.fights import FIGHT_REPAIRS, FIGHT_WINDOW, FightLog, last_writer

CHILD = ("default", "web", "Deployment")


def test_a_fight_needs_enough_repairs_within_the_window_and_ends_when_they_age_out() -> None:
    now = [0.0]
    log = FightLog(lambda: now[0])
    for _ in range(FIGHT_REPAIRS - 1):
        log.repaired(CHILD, ["spec.replicas"], None)
        now[0] += 10
    assert log.ongoing(CHILD) is None
    assert log.next_repair_is_a_fight(CHILD)
    log.repaired(CHILD, ["spec.replicas"], '"hpa" (Update)')
    fight = log.ongoing(CHILD)
    assert fight is not None and fight.writer == '"hpa" (Update)' and fight.fields == ("spec.replicas",)
    now[0] += FIGHT_WINDOW
    assert log.ongoing(CHILD) is None
    assert not log.next_repair_is_a_fight(CHILD)


def test_repairs_far_apart_are_never_a_fight() -> None:
    now = [0.0]
    log = FightLog(lambda: now[0])
    for _ in range(3 * FIGHT_REPAIRS):
        log.repaired(CHILD, ["spec.replicas"], None)
        now[0] += FIGHT_WINDOW / (FIGHT_REPAIRS - 1) + 1
        assert log.ongoing(CHILD) is None


def test_last_writer_reads_the_owner_of_a_container_field_by_the_entry_name() -> None:
    deployment = {
        "metadata": {
            "managedFields": [
                {
                    "manager": "webserver-operator",
                    "operation": "Update",
                    "time": "2026-11-23T10:00:00Z",
                    "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"web"}': {}}}}}},
                },
                {
                    "manager": "image-pinner",
                    "operation": "Apply",
                    "time": "2026-11-23T09:00:00Z",
                    "fieldsV1": {
                        "f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"web"}': {"f:image": {}}}}}}
                    },
                },
                {
                    "manager": "kubectl-edit",
                    "operation": "Update",
                    "time": "2026-11-23T11:00:00Z",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}},
                },
            ]
        }
    }
    path = "spec.template.spec.containers[web].image"
    assert (
        last_writer(deployment, [path], ignore="webserver-operator")
        == '"image-pinner" (Apply, at 2026-11-23T09:00:00Z)'
    )
    assert last_writer(deployment, ["spec.replicas"], ignore="webserver-operator") is None
    assert last_writer({"metadata": {}}, [path], ignore="webserver-operator") is None
