"""batch/v1 through the in-process server: Job selectors and defaults, CronJob schedules, Tables."""
from __future__ import annotations

import copy

from twisted.trial import unittest

from kapiserver.apis.batch import cron
from kapiserver.testing.cases import ServerTestCase, run

BATCH = "/apis/batch/v1/namespaces/default"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def pod_template(restart: str = "Never") -> dict:
    spec = {"containers": [{"name": "pi", "image": "perl:5.34"}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"spec": spec}


def job(name: str = "pi", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": pod_template(), **spec}}


def cronjob(name: str = "tick", schedule: str = "*/5 * * * *", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": pod_template("OnFailure")}}, **spec}}


class JobTests(ServerTestCase):
    @run
    async def test_generated_selector_labels_and_defaults(self):
        r = await self.client.post(f"{BATCH}/jobs", job())
        self.assertEqual(r.code, 201, r.body)
        uid = r.body["metadata"]["uid"]
        spec = r.body["spec"]
        self.assertEqual(spec["selector"], {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        expected = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi",
                    "controller-uid": uid, "job-name": "pi"}
        self.assertEqual(spec["template"]["metadata"]["labels"], expected)
        self.assertEqual(r.body["metadata"]["labels"], expected)
        self.assertNotIn("manualSelector", spec)
        self.assertEqual({k: spec[k] for k in ("completions", "parallelism", "backoffLimit", "completionMode",
                                               "suspend", "podReplacementPolicy")},
                         {"completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
                          "suspend": False, "podReplacementPolicy": "TerminatingOrFailed"})
        self.assertEqual(spec["template"]["spec"]["terminationGracePeriodSeconds"], 30)
        # the Job can be found by the label its pods would carry
        r = await self.client.get(f"{BATCH}/jobs?labelSelector=batch.kubernetes.io/job-name%3Dpi")
        self.assertEqual([i["metadata"]["name"] for i in r.body["items"]], ["pi"])

    @run
    async def test_manual_selector_must_match(self):
        body = job("manual", manualSelector=True, selector={"matchLabels": {"run": "x"}})
        r = await self.client.post(f"{BATCH}/jobs", body)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"], 'Job.batch "manual" is invalid: spec.template.metadata.labels: Invalid '
                         'value: map[string]string(nil): `selector` does not match template `labels`')
        body["spec"]["template"]["metadata"] = {"labels": {"run": "x"}}
        r = await self.client.post(f"{BATCH}/jobs", body)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["template"]["metadata"]["labels"], {"run": "x"})

    @run
    async def test_validation_and_immutable_template(self):
        bad = job("bad", parallelism=-1)
        bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
        r = await self.client.post(f"{BATCH}/jobs", bad)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"], 'Job.batch "bad" is invalid: ['
                         'spec.parallelism: Invalid value: -1: must be greater than or equal to 0, '
                         'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"]')
        created = (await self.client.post(f"{BATCH}/jobs", job())).body
        changed = copy.deepcopy(created)
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = "perl:5.36"
        r = await self.client.put(f"{BATCH}/jobs/pi", changed)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["details"]["causes"][0]["field"], "spec.template")
        self.assertTrue(r.body["details"]["causes"][0]["message"].endswith("field is immutable"))
        r = await self.client.patch(f"{BATCH}/jobs/pi", {"spec": {"completions": 3}})
        self.assertEqual(r.body["details"]["causes"][0]["message"], "Invalid value: 3: field is immutable")
        # suspending and resuming is allowed and bumps the generation
        r = await self.client.patch(f"{BATCH}/jobs/pi", {"spec": {"suspend": True}})
        self.assertEqual((r.code, r.body["metadata"]["generation"]), (200, 2), r.body)

    @run
    async def test_columns(self):
        await self.client.post(f"{BATCH}/jobs", job())
        await self.client.post(f"{BATCH}/jobs", job("wide", completions=None, parallelism=3))
        t = await self.client.get(f"{BATCH}/jobs", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]],
                         ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"])
        rows = {row["cells"][0]: row["cells"] for row in t.body["rows"]}
        self.assertEqual(rows["pi"][1:4], ["Running", "0/1", ""])
        self.assertEqual(rows["wide"][2], "0/1 of 3")
        self.assertTrue(rows["pi"][7].startswith("batch.kubernetes.io/controller-uid="))


class CronJobTests(ServerTestCase):
    @run
    async def test_defaults_and_columns(self):
        r = await self.client.post(f"{BATCH}/cronjobs", cronjob())
        self.assertEqual(r.code, 201, r.body)
        spec = r.body["spec"]
        self.assertEqual({k: spec[k] for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit",
                                               "failedJobsHistoryLimit")},
                         {"concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
                          "failedJobsHistoryLimit": 1})
        self.assertEqual(spec["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst")
        self.assertNotIn("backoffLimit", spec["jobTemplate"]["spec"])
        t = await self.client.get(f"{BATCH}/cronjobs", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]][:7],
                         ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age"])
        self.assertEqual(t.body["rows"][0]["cells"][:6], ["tick", "*/5 * * * *", "<none>", "False", 0, "<none>"])

    @run
    async def test_schedule_and_policy_validation(self):
        r = await self.client.post(f"{BATCH}/cronjobs", cronjob(schedule="61 * * * *"))
        self.assertEqual(r.body["message"], 'CronJob.batch "tick" is invalid: spec.schedule: Invalid value: '
                         '"61 * * * *": end of range (61) above maximum (59): 61')
        r = await self.client.post(f"{BATCH}/cronjobs", cronjob(schedule=""))
        self.assertEqual(r.body["details"]["causes"][0],
                         {"reason": "FieldValueRequired", "field": "spec.schedule", "message": "Required value"})
        r = await self.client.post(f"{BATCH}/cronjobs", cronjob(concurrencyPolicy="Sometimes",
                                                                timeZone="Mars/Base"))
        self.assertEqual(r.body["message"], 'CronJob.batch "tick" is invalid: ['
                         'spec.timeZone: Invalid value: "Mars/Base": unknown time zone Mars/Base, '
                         'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: '
                         '"Allow", "Forbid", "Replace"]')
        r = await self.client.post(f"{BATCH}/cronjobs", cronjob(schedule="@hourly", timeZone="Europe/Paris"))
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.patch(f"{BATCH}/cronjobs/tick", {"spec": {"schedule": "CRON_TZ=UTC 0 * * * *"}})
        self.assertEqual(r.body["details"]["causes"][0]["message"], 'Invalid value: "CRON_TZ=UTC 0 * * * *": '
                         'cannot use TZ or CRON_TZ in schedule, use timeZone field instead')


class CronSyntaxTests(unittest.TestCase):
    def test_accepted(self):
        for spec in ("* * * * *", "0 0 1 1 *", "*/15 9-17 * * mon-fri", "0 0 ? JAN,jul SUN", "5/10 * * * *",
                     "@daily", "@every 1h30m", "0 0 29 2 *"):
            self.assertEqual(cron.schedule_error(spec), "", spec)

    def test_refused_with_upstream_messages(self):
        self.assertEqual(cron.schedule_error("* * * *"), "expected exactly 5 fields, found 4: [* * * *]")
        self.assertEqual(cron.schedule_error("@often"), "unrecognized descriptor: @often")
        self.assertEqual(cron.schedule_error("* * * * 7"), "end of range (7) above maximum (6): 7")
        self.assertEqual(cron.schedule_error("x * * * *"),
                         'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax')
        self.assertEqual(cron.schedule_error("5-1 * * * *"), "beginning of range (5) beyond end of range (1): 5-1")
        self.assertEqual(cron.schedule_error("*/0 * * * *"), "step of range should be a positive number: */0")
        self.assertEqual(cron.schedule_error("@every soon"), 'failed to parse duration @every soon: '
                         'time: invalid duration "soon"')
