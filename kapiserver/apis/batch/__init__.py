"""batch/v1: Jobs and CronJobs."""
