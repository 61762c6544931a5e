"""Context mixing in the Transformer networks (ALTI/ALTI+, value zeroing): the torch half of the methods that
``attribution.mixing_methods`` registers, imported only when one is computed (listing the methods stays torch-free).
"""
