"""`render k8s`: the replicas and Nginx of `up` as a kustomize base (pools, Services, front, PDB)."""
