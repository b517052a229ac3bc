"""The stand-in model server: a real HTTP server that answers from a script.

Test double at the model boundary: no small model that fits a CI machine calls tools, so
tool-calling paths are tested against it. ``ankka standin --script FILE`` runs it.
"""
