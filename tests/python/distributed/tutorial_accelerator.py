"""The PyTorch DDP tutorial (ddp-tutorial-series/multigpu_torchrun.py) as it is written
today, against torch.accelerator rather than CUDA, run unchanged: nothing here names neuron.
It must pick the neuron device and the "neuron" backend by itself and train; the test
(tests/python/test_distributed_training.py) reads what it prints.

Usage: torchrun --nproc_per_node=2 tutorial_accelerator.py [total_epochs] [batch_size]
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.size = size
        g = torch.Generator().manual_seed(0)
        self.data = [(torch.rand(20, generator=g), torch.rand(1, generator=g)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup():
    rank = int(os.environ["LOCAL_RANK"])
    if torch.accelerator.is_available():
        device = torch.device(f"{torch.accelerator.current_accelerator()}:{rank}")
        torch.accelerator.set_device_index(rank)
    else:
        device = torch.device("cpu")
    backend = torch.distributed.get_default_backend_for_device(device)
    init_process_group(backend=backend, device_id=device)
    print(f"rank {os.environ['RANK']}: device {device} backend {backend} "
          f"process group {torch.distributed.get_backend()}", flush=True)
    return device


class Trainer:
    def __init__(self, model, train_data, optimizer, device):
        self.device = device
        self.model = model.to(device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.model = DDP(self.model, device_ids=[device.index])
        self.losses = []

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss.item())

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[{self.device}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}", flush=True)
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            source = source.to(self.device)
            targets = targets.to(self.device)
            self._run_batch(source, targets)

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def load_train_objs():
    torch.manual_seed(0)
    train_set = MyTrainDataset(64)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=False,
                      sampler=DistributedSampler(dataset))


def main(total_epochs, batch_size):
    device = ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, device)
    trainer.train(total_epochs)
    params = [p.device for p in trainer.model.parameters()]
    print(f"rank {os.environ['RANK']}: parameters on {sorted(set(map(str, params)))} "
          f"losses {trainer.losses[0]:.4f} -> {trainer.losses[-1]:.4f} in {len(trainer.losses)} steps",
          flush=True)
    destroy_process_group()


if __name__ == "__main__":
    total_epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    batch_size = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    main(total_epochs, batch_size)
