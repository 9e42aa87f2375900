output "host" {
  value       = var.domain_name
  description = "The broker's host name for clients (TLS on port)."
}

output "port" {
  value       = 8883
  description = "MQTT over TLS."
}

output "load_balancer_dns_name" {
  value       = aws_lb.broker.dns_name
  description = "Point domain_name here when zone_id is null."
}
