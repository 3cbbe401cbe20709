"""Short notes on how far an input is from what a model can read (`Explanation.warnings`), one module per modality.

Low in the layers: plain values in, strings out; no torch, no Streamlit.
"""
