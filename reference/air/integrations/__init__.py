"""`reference.air.integrations`: experiment trackers for Train workers and Tune trials
(`mlflow`: `setup_mlflow`, `MLflowLoggerCallback`; `wandb`: `setup_wandb`,
`WandbLoggerCallback`)."""
