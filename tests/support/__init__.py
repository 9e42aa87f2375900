"""What tests share: waits, job factories, local brokers, paths, the AWS-action recorder."""
