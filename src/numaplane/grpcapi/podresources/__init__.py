"""Kubelet PodResources API (``v1.PodResourcesLister``)."""
