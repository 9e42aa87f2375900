output "database_url" {
  value       = "postgresql+psycopg://framefleet@${aws_db_instance.this.endpoint}/framefleet?sslmode=require"
  description = "FRAMEFLEET_DATABASE_URL without its password (FRAMEFLEET_DATABASE_PASSWORD supplies it)."
}

output "master_password_secret_arn" {
  value       = aws_db_instance.this.master_user_secret[0].secret_arn
  description = "The Secrets Manager secret RDS keeps the password in (JSON: username, password)."
}
