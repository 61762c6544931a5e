"""Attribution beside attention: what each output token depended on (gradients, contrast, ALTI+, value zeroing)
and what each decoder layer would predict (the logit lens). ``base`` holds the result type and the registry."""
