//! The deployment says what the code says: Terraform (infra/), the AWS CLI JSON
//! (ecs/), docker-compose.ec2.yaml, the Dockerfile and .env.example agree with
//! each other and with the code on the metric, the worker's command, size and
//! concurrency, the scaling bounds and policies, the ports, the secrets and who
//! reads them, the IAM the code needs, a stop timeout that covers the worker's
//! drain, and alarms that watch metrics someone publishes and reach someone.
//! Reads files only.

mod alarms;
mod backup;
mod durability;
mod hardening;
mod iam;
mod ports;
mod release;
mod release_script;
mod rotation;
mod scaling;
mod secrets;
mod settings;
mod sources;
mod worker;
