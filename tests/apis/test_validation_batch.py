"""batch/v1: upstream's field errors (kubernetes v1.32 pkg/apis/batch/validation,
robfig/cron's parser messages for schedules)."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis.harness import REMOVE, KindCases, invalid_update_causes

NEGATIVE = "must be greater than or equal to 0"
EXIT = "spec.podFailurePolicy.rules[0].onExitCodes"
SUCCESS_POLICY = ("batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule{batch.SuccessPolicyRule{"
                  "SucceededIndexes:(*string)(0xc000000000), SucceededCount:(*int32)(0xc000000000)}}}")


class JobCases(KindCases, unittest.TestCase):
    group, kind = "batch", "Job"
    cases = [
        ({"spec.parallelism": -1}, [f"spec.parallelism: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.activeDeadlineSeconds": -1}, [f"spec.activeDeadlineSeconds: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.backoffLimit": -1}, [f"spec.backoffLimit: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.ttlSecondsAfterFinished": -1}, [f"spec.ttlSecondsAfterFinished: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.completionMode": "Random"}, [
            'spec.completionMode: Unsupported value: "Random": supported values: "NonIndexed", "Indexed"',
            f"spec.successPolicy: Invalid value: {SUCCESS_POLICY}: requires indexed completion mode"]),
        ({"spec.completionMode": "NonIndexed"}, [
            "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
            "spec.maxFailedIndexes: Invalid value: 2: requires indexed completion mode",
            f"spec.successPolicy: Invalid value: {SUCCESS_POLICY}: requires indexed completion mode"]),
        ({"spec.completions": REMOVE, "spec.successPolicy": REMOVE}, [
            "spec.completions: Required value: when completion mode is Indexed"]),
        ({"spec.maxFailedIndexes": 5}, ["spec.maxFailedIndexes: Invalid value: 5: must be less than or equal to "
                                        "completions"]),
        ({"spec.backoffLimitPerIndex": REMOVE}, [
            "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified"]),
        ({"spec.parallelism": 100001}, [
            "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode "
            "is Indexed"]),
        ({"metadata.name": "w" * 62}, [
            f'metadata.name: Invalid value: "{"w" * 62}": will not able to create pod with invalid DNS label: '
            f'{"w" * 62}-3']),
        ({"spec.template.spec.restartPolicy": "Always"}, [
            'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']),
        ({"spec.template.spec.restartPolicy": "OnFailure"}, [
            'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
            'podFailurePolicy is specified']),
        ({"spec.podFailurePolicy.rules[0].action": "Retry"}, [
            'spec.podFailurePolicy.rules[0].action: Unsupported value: "Retry": supported values: "Count", '
            '"FailIndex", "FailJob", "Ignore"']),
        ({f"{EXIT}.containerName": "other"}, [
            f'{EXIT}.containerName: Invalid value: "other": must be one of the container or initContainer names in '
            f'the pod template']),
        ({f"{EXIT}.operator": "Between"}, [
            f'{EXIT}.operator: Unsupported value: "Between": supported values: "In", "NotIn"']),
        ({f"{EXIT}.values": [2, 1]}, [f"{EXIT}.values: Invalid value: []int32{{2, 1}}: must be ordered"]),
        ({f"{EXIT}.values": [0, 1]}, [f"{EXIT}.values[0]: Invalid value: 0: must not be 0 for the In operator"]),
        ({f"{EXIT}.values": [1, 1]}, [f"{EXIT}.values[1]: Duplicate value: 1"]),
        ({f"{EXIT}.values": []}, [f"{EXIT}.values: Invalid value: []int32{{}}: at least one value is required"]),
        ({"spec.podFailurePolicy.rules[0].onPodConditions": [{"type": "DisruptionTarget"}]}, [
            "spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and OnPodConditions is not "
            "supported"]),
        ({"spec.podFailurePolicy.rules[1].onPodConditions": []}, [
            "spec.podFailurePolicy.rules[1]: Invalid value: specifying one of OnExitCodes and OnPodConditions is "
            "required"]),
        ({"spec.podFailurePolicy.rules[1].onPodConditions[0].status": "Maybe"}, [
            'spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: "Maybe": supported '
            'values: "False", "True", "Unknown"']),
        ({"spec.successPolicy.rules[0].succeededIndexes": "0-9"}, [
            'spec.successPolicy.rules[0].succeededIndexes: Invalid value: "0-9": error parsing succeededIndexes: '
            'too large index: "9"',
            "spec.successPolicy.rules[0].succeededCount: Invalid value: 2: must be less than or equal to 0 (the "
            "number of indexes in the specified succeededIndexes field)"]),
        ({"spec.successPolicy.rules[0].succeededIndexes": "2-1"}, [
            'spec.successPolicy.rules[0].succeededIndexes: Invalid value: "2-1": error parsing succeededIndexes: '
            'non-increasing order, previous: 2, current: 1',
            "spec.successPolicy.rules[0].succeededCount: Invalid value: 2: must be less than or equal to 0 (the "
            "number of indexes in the specified succeededIndexes field)"]),
        ({"spec.successPolicy.rules[0].succeededCount": 5}, [
            "spec.successPolicy.rules[0].succeededCount: Invalid value: 5: must be less than or equal to 4 (the "
            "number of specified completions)",
            "spec.successPolicy.rules[0].succeededCount: Invalid value: 5: must be less than or equal to 3 (the "
            "number of indexes in the specified succeededIndexes field)"]),
        ({"spec.successPolicy.rules": []}, [
            "spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy "
            "is specified"]),
        ({"spec.podReplacementPolicy": "TerminatingOrFailed"}, [
            'spec.podReplacementPolicy: Unsupported value: "TerminatingOrFailed": supported values: "Failed"']),
        ({"spec.managedBy": "kueue"}, [
            'spec.managedBy: Invalid value: "kueue": must be a domain-prefixed path (such as "acme.io/foo")']),
        ({"spec.template.spec.containers[0].image": ""}, ["spec.template.spec.containers[0].image: Required value"]),
    ]
    update_cases = [
        ({"spec.parallelism": 1, "spec.activeDeadlineSeconds": 300, "spec.suspend": True}, []),
        ({"spec.completions": 6, "spec.parallelism": 6}, []),
        ({"spec.completions": 6}, [
            "spec.completions: Invalid value: 6: can only be modified in tandem with spec.parallelism"]),
        ({"spec.backoffLimitPerIndex": 3}, ["spec.backoffLimitPerIndex: Invalid value: 3: field is immutable"]),
        ({"spec.managedBy": "example.com/queue"}, [
            'spec.managedBy: Invalid value: "example.com/queue": field is immutable']),
    ]
    status_cases = [
        ({"status": {"active": 1, "ready": 1, "startTime": "2024-01-01T00:00:00Z"}}, []),
        ({"status": {"active": -1}}, [f"status.active: Invalid value: -1: {NEGATIVE}"]),
        ({"status": {"completedIndexes": "0,9"}}, [
            'status.completedIndexes: Invalid value: "0,9": error parsing completedIndexes: too large index: "9"']),
    ]

    def test_the_template_is_immutable(self) -> None:
        [cause] = invalid_update_causes("batch", "Job", {"spec.template.spec.containers[0].image": "other"})
        self.assertTrue(cause.startswith("spec.template: Invalid value: core.PodTemplateSpec{"), cause)
        self.assertTrue(cause.endswith("}: field is immutable"), cause)


class CronJobCases(KindCases, unittest.TestCase):
    group, kind = "batch", "CronJob"
    cases = [
        ({"spec.schedule": ""}, ["spec.schedule: Required value"]),
        ({"spec.schedule": "0 3 * *"}, [
            'spec.schedule: Invalid value: "0 3 * *": expected exactly 5 fields, found 4: [0 3 * *]']),
        ({"spec.schedule": "61 * * * *"}, [
            'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61']),
        ({"spec.schedule": "x * * * *"}, [
            'spec.schedule: Invalid value: "x * * * *": failed to parse int from x: strconv.Atoi: parsing "x": '
            'invalid syntax']),
        ({"spec.schedule": "@hourly"}, []),
        ({"spec.schedule": "@sometimes"}, [
            'spec.schedule: Invalid value: "@sometimes": unrecognized descriptor: @sometimes']),
        ({"spec.schedule": "TZ=UTC 0 3 * *"}, [
            'spec.schedule: Invalid value: "TZ=UTC 0 3 * *": expected exactly 5 fields, found 4: [0 3 * *]',
            'spec.schedule: Invalid value: "TZ=UTC 0 3 * *": cannot use TZ or CRON_TZ in schedule, use timeZone '
            'field instead']),
        ({"spec.timeZone": "Mars/Olympus"}, ['spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone '
                                             'Mars/Olympus']),
        ({"spec.timeZone": "Local"}, [
            'spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as defined in '
            'https://www.iana.org/time-zones']),
        ({"spec.timeZone": ""}, ['spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string']),
        ({"spec.timeZone": "../etc"}, ['spec.timeZone: Invalid value: "../etc": unknown time zone ../etc']),
        ({"spec.concurrencyPolicy": "Sometimes"}, [
            'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", '
            '"Replace"']),
        ({"spec.startingDeadlineSeconds": -1}, [f"spec.startingDeadlineSeconds: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.successfulJobsHistoryLimit": -1}, [
            f"spec.successfulJobsHistoryLimit: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.jobTemplate.spec.template.spec.restartPolicy": "Always"}, [
            'spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']),
        ({"spec.jobTemplate.spec.manualSelector": True}, [
            'spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: "nil", "false"']),
        ({"spec.jobTemplate.spec.selector": {"matchLabels": {"app": "web"}}}, [
            'spec.jobTemplate.spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{'
            '"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated']),
        ({"metadata.name": "n" * 53}, [f'metadata.name: Invalid value: "{"n" * 53}": must be no more than 52 '
                                       f'characters']),
    ]
    update_cases = [
        ({"spec.schedule": "*/5 * * * *", "spec.suspend": True}, []),
        ({"spec.timeZone": "Mars/Olympus"}, ['spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone '
                                             'Mars/Olympus']),
    ]
